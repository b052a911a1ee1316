-- metamethods: __close loops while an error unwinds its scope
-- drive: classify; expect: time limit reached
max_attempts = 3
local closer = setmetatable({}, { __close = function() while true do end end }) -- HERE
function is_transient(status)
  if status ~= 503 then return false end
  local c <close> = closer
  error("boom")
end
