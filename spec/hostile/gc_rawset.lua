-- __gc: put in the metatable with rawset before setmetatable
-- drive: load; expect: __gc is not allowed
max_attempts = 3
local mt = {}
rawset(mt, "__gc", function() while true do end end)
local t = setmetatable({}, mt) -- HERE
