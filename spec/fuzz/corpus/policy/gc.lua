max_attempts = 3
setmetatable({}, { __gc = function() while true do end end })
