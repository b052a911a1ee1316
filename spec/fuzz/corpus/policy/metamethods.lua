max_attempts = 3
local mt = {}
mt.__index = function(t, k) return k end
mt.__eq = function() return true end
mt.__lt = function() return false end
mt.__concat = function(a, b) return "c" end
mt.__len = function() return 7 end
mt.__call = function(self, x) return x end
mt.__close = function() end
local a, b = setmetatable({}, mt), setmetatable({}, mt)
function is_transient(status)
  local c <close> = setmetatable({}, mt)
  return a == b and not (a < b) and #a == 7 and (a .. b) == "c" and a(true) and a.x == "x"
end
