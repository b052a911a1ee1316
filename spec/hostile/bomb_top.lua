-- memory: a gigabyte at the top of the script, at load
-- drive: load; expect: memory limit reached
max_attempts = 3
local s = string.rep('x', 1e9) -- HERE
