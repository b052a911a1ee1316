-- memory: load of a chunk of megabytes
-- drive: classify; expect: memory limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  return load(('x = 1 '):rep(2e6)) ~= nil -- HERE
end
