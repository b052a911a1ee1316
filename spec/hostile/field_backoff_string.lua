-- fields: max_attempts = 2 backoff = 'fast'
-- drive: load; expect: backoff: expected
max_attempts = 2
backoff = 'fast' -- HERE
