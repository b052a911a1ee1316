-- errors: prepare raises a boolean
-- drive: cli_prepare; expect: error object is a boolean value
max_attempts = 2
function prepare(request, attempt)
  error(true) -- HERE
end
