max_attempts = 1e308
deadline = -1
attempt_timeout = 0/0
backoff = { initial = 1e308, multiplier = 1e308, max = math.huge, jitter = "sideways", step = -5 }
body_limit = -3
budget = { max_tokens = -1, token_ratio = 1e9 }
breaker = { failures = 0, open_seconds = 1e300, probes = 2^62 }
max_attemps = 3
