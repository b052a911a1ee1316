-- spec/batch/breaker.lua: a circuit breaker shared by a batch's calls; it
-- stays open for the whole test once open.
name = "breaker"
max_attempts = 5
deadline = 30
backoff = { initial = 0.2, jitter = "none" }
breaker = { failures = 3, open_seconds = 60, probes = 1 }
