-- spec/fleet/budget.lua: a retry budget, shareable through Redis (--redis).
name = "fleet-budget"
max_attempts = 4
deadline = 10
attempt_timeout = 2
backoff = { initial = 0.05, max = 0.2, jitter = "full" }
budget = { max_tokens = 10, token_ratio = 0.1 }
fleet = { sync = 50 }
