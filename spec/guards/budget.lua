-- A budget of 10 tokens: a lone call that keeps failing gets 4 retries
max_attempts = 50
backoff = { initial = 0.01, jitter = "none" }
budget = { max_tokens = 10, token_ratio = 0.1 }
