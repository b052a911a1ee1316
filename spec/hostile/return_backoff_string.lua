-- returns: backoff returns '5'
-- drive: classify; expect: backoff returned a string
max_attempts = 3
function backoff(n, previous) -- HERE
  return '5'
end
