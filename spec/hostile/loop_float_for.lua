-- loops: a numeric for to math.huge
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  for i = 1, math.huge do end -- HERE
end
