-- metamethods: __add loops, reached by (a + 1) ~= nil
-- drive: classify; expect: time limit reached
max_attempts = 3
local spin = function() while true do end end -- HERE
local mt = { __add = spin }
local a, b = setmetatable({}, mt), setmetatable({}, mt)
function is_transient(status)
  if status ~= 503 then return false end
  return (a + 1) ~= nil
end
