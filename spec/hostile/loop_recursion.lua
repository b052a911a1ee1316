-- loops: endless recursion (not a tail call) in is_transient
-- drive: classify; expect: stack overflow|memory limit reached
max_attempts = 3
local function deeper(n) return 1 + deeper(n + 1) end -- HERE
function is_transient(status)
  if status ~= 503 then return false end
  return deeper(1) > 0
end
