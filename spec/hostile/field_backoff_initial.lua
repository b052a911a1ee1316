-- fields: max_attempts = 2 backoff = { initial = -1e308, multiplier = 0/0 }
-- drive: load; expect: backoff.initial: expected
max_attempts = 2
backoff = { initial = -1e308, multiplier = 0/0 } -- HERE
