-- memory: string.rep of a gigabyte
-- drive: classify; expect: memory limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  return #string.rep('x', 1e9) -- HERE
end
