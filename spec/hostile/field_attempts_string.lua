-- fields: max_attempts = 'three'
-- drive: load; expect: max_attempts: expected
max_attempts = 'three' -- HERE
