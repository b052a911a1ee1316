-- __gc: a finalizer function at load
-- drive: load; expect: __gc is not allowed
max_attempts = 3
setmetatable({}, { __gc = function() end }) -- HERE
