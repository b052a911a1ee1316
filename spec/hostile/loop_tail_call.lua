-- loops: endless tail calls, which use no stack
-- drive: classify; expect: time limit reached
max_attempts = 3
local function again(n) return again(n + 1) end -- HERE
function is_transient(status)
  if status ~= 503 then return false end
  return again(1)
end
