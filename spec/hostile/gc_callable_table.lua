-- __gc: a finalizer that is a callable table
-- drive: load; expect: __gc is not allowed
max_attempts = 3
local f = setmetatable({}, { __call = function() while true do end end })
setmetatable({}, { __gc = f }) -- HERE
