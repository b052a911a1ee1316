-- fields: max_attempts = 2 deadline = math.huge
-- drive: load; expect: deadline: expected
max_attempts = 2
deadline = math.huge -- HERE
