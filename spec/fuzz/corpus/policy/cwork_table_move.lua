-- C work: table.move over 2^63 empty slots
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  return table.move({}, 1, math.maxinteger - 1, 2) -- HERE
end
