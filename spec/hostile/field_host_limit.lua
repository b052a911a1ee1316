-- fields: max_attempts = 2 time_limit = 1e9
-- drive: load; expect: set by the host
max_attempts = 2
time_limit = 1e9 -- HERE
