-- returns: backoff returns -1
-- drive: classify; expect: backoff returned an invalid number
max_attempts = 3
function backoff(n, previous) -- HERE
  return -1
end
