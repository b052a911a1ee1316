-- returns: backoff returns 0/0
-- drive: classify; expect: backoff returned an invalid number
max_attempts = 3
function backoff(n, previous) -- HERE
  return 0/0
end
