-- fields: max_attempts = 2 breaker = { failures = 0, open_seconds = -1 }
-- drive: load; expect: breaker.
max_attempts = 2
breaker = { failures = 0, open_seconds = -1 } -- HERE
