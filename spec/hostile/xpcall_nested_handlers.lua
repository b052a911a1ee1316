-- xpcall: a handler that runs an xpcall whose handler loops
-- drive: classify; expect: time limit reached
max_attempts = 3
local function inner(m) while true do end end -- HERE
function is_transient(status)
  if status ~= 503 then return false end
  return xpcall(error, function(m) return xpcall(error, inner, m) end, "x")
end
