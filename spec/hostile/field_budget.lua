-- fields: max_attempts = 2 budget = { max_tokens = -1, token_ratio = 1e300 }
-- drive: load; expect: budget.
max_attempts = 2
budget = { max_tokens = -1, token_ratio = 1e300 } -- HERE
