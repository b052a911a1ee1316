-- memory: rep with a separator
-- drive: classify; expect: memory limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  return #('x'):rep(1e8, ',') -- HERE
end
