-- spec/fleet/breaker.lua: a circuit breaker, shareable through Redis.
name = "fleet-breaker"
max_attempts = 3
deadline = 10
attempt_timeout = 2
backoff = { initial = 0.02, max = 0.05, jitter = "full" }
breaker = { failures = 3, open_seconds = 1, probes = 1 }
fleet = { sync = 100 }
