-- __gc: a __gc field that is not even a function
-- drive: load; expect: __gc is not allowed
max_attempts = 3
local t = setmetatable({}, { __gc = true }) -- HERE
