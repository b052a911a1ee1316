-- Opens after 2 transient failures in a row
max_attempts = 50
backoff = { initial = 0.01, jitter = "none" }
breaker = { failures = 2, open_seconds = 30, probes = 1 }
