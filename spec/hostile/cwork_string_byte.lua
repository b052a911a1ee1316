-- C work: string.byte of a whole megabyte
-- drive: classify; expect: string slice too long|stack overflow
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  return ('x'):rep(1e6):byte(1, -1) -- HERE
end
