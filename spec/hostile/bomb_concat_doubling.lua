-- memory: a string that doubles without end
-- drive: classify; expect: memory limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  local s = 'x' while true do s = s .. s end -- HERE
end
