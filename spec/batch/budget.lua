-- spec/batch/budget.lua: a retry budget of 10 tokens shared by a batch's calls.
name = "budget"
max_attempts = 5
deadline = 30
backoff = { initial = 0.05, jitter = "additive", jitter_max = 0.05 }
budget = { max_tokens = 10, token_ratio = 0.1 }
