-- __gc: set by a chunk load() runs with an environment of its own
-- drive: load; expect: __gc is not allowed; where: inner:1
max_attempts = 3
local env = { setmetatable = setmetatable, print = print }
load("setmetatable({}, { __gc = print })", "=inner", "t", env)()
