-- loops: on_breaker spins when the breaker opens
-- drive: breaker; expect: time limit reached
max_attempts = 5
breaker = { failures = 2, open_seconds = 60, probes = 1 }
function on_breaker(state)
  while state do end -- HERE
end
