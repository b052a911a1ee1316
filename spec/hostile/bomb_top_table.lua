-- memory: table growth at the top of the script, at load
-- drive: load; expect: memory limit reached
max_attempts = 3
local t = {} for i = 1, 1e8 do t[i] = i end -- HERE
