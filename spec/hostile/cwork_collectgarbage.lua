-- C work: full collections without end
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  while true do collectgarbage() collectgarbage('step', 1e9) end -- HERE
end
