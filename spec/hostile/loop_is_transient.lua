-- loops: is_transient spins in while true
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  while true do end -- HERE
end
