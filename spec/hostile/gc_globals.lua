-- __gc: on the globals' metatable
-- drive: load; expect: __gc is not allowed
max_attempts = 3
setmetatable(_G, { __gc = function() while true do end end }) -- HERE
