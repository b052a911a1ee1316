-- metamethods: __close loops when its variable goes out of scope
-- drive: classify; expect: time limit reached
max_attempts = 3
local closer = setmetatable({}, { __close = function() while true do end end }) -- HERE
function is_transient(status)
  if status ~= 503 then return false end
  do local c <close> = closer end
  return true
end
