-- metamethods: a __newindex chain that loops back on itself
-- drive: classify; expect: '__newindex' chain too long
max_attempts = 3
local t = {}
setmetatable(t, { __newindex = setmetatable({}, { __newindex = t }) })
function is_transient(status)
  if status ~= 503 then return false end
  t.x = 1 -- HERE
end
