max_attempts = 3
local mt = {}
local t = setmetatable({}, mt)
mt.__gc = function() while true do end end
function is_transient() t = nil collectgarbage() return true end
