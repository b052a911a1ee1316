-- xpcall: an ordinary error, then a message handler that loops
-- drive: classify; expect: time limit reached
max_attempts = 3
local function handler(m)
  while true do end -- HERE
end
function is_transient(status)
  if status ~= 503 then return false end
  return xpcall(error, handler, "first")
end
