-- fields: max_attempts = 2 deadline = 0/0
-- drive: load; expect: deadline: expected
max_attempts = 2
deadline = 0/0 -- HERE
