-- fields: max_attempts = 2 backoff = { kind = 'sideways' }
-- drive: load; expect: backoff.kind: expected
max_attempts = 2
backoff = { kind = 'sideways' } -- HERE
