-- fields: max_attempts = 1e308
-- drive: load; expect: max_attempts: expected
max_attempts = 1e308 -- HERE
