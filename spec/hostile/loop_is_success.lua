-- loops: is_success spins in repeat ... until false
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_success(status)
  if status ~= 503 then return false end
  local n = 0
  repeat n = n + 1 until false -- HERE
end
