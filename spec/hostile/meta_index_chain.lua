-- metamethods: a table that is its own __index: Lua's loop guard
-- drive: classify; expect: '__index' chain too long
max_attempts = 3
local t = {}
setmetatable(t, { __index = setmetatable({}, { __index = t }) })
function is_transient(status)
  if status ~= 503 then return false end
  return t.missing -- HERE
end
