return { max_attempts = 4, deadline = 10, backoff = { kind = "linear", initial = 0.1, step = 0.2, jitter = "full" } }
