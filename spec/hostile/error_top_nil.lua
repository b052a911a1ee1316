-- errors: error(nil) at the top of the script
-- drive: load; expect: error object is a nil value
max_attempts = 3
error(nil) -- HERE
