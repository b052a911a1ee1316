-- fields: max_attempts = 2 body_limit = -5
-- drive: load; expect: body_limit: expected
max_attempts = 2
body_limit = -5 -- HERE
