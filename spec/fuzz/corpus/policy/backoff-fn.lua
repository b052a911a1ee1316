max_attempts = 5
function backoff(n, previous) return math.min(previous * 2 + math.random(), 30) end
