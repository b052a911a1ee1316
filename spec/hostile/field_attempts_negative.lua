-- fields: deadline = 5 max_attempts = -1
-- drive: load; expect: max_attempts: expected
deadline = 5
max_attempts = -1 -- HERE
