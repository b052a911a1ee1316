-- spec/fleet/long.lua: calls that go on retrying for a few seconds, so
-- that Redis can go away (and come back) under them.
name = "fleet-long"
max_attempts = 1000
deadline = 3
attempt_timeout = 1
backoff = { initial = 0.05, max = 0.1, jitter = "equal" }
budget = { max_tokens = 1000, token_ratio = 0.1 }
breaker = { failures = 100000, open_seconds = 1 }
fleet = { sync = 50 }
