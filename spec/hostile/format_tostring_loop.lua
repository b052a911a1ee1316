-- callbacks: string.format("%s") of a value whose __tostring loops
-- drive: classify; expect: time limit reached
max_attempts = 3
local v = setmetatable({}, { __tostring = function() while true do end end }) -- HERE
function is_transient(status)
  if status ~= 503 then return false end
  return string.format("%s", v)
end
