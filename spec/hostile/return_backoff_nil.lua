-- returns: backoff returns nil
-- drive: classify; expect: backoff returned a nil
max_attempts = 3
function backoff(n, previous) -- HERE
  return nil
end
