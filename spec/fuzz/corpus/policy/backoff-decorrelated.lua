deadline = 60
attempt_timeout = 5
backoff = { initial = 0.5, max = 20, jitter = "decorrelated" }
retry_after = true
max_retry_after = 120
