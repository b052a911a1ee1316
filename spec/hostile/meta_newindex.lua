-- metamethods: __newindex loops, reached by (function() a.x = 1 end)()
-- drive: classify; expect: time limit reached
max_attempts = 3
local spin = function() while true do end end -- HERE
local mt = { __newindex = spin }
local a, b = setmetatable({}, mt), setmetatable({}, mt)
function is_transient(status)
  if status ~= 503 then return false end
  return (function() a.x = 1 end)()
end
