-- memory: a 2 GiB rep through the string metatable
-- drive: classify; expect: resulting string too large|memory limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  return #('x'):rep(2^31) -- HERE
end
