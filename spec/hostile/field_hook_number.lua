-- fields: max_attempts = 2 is_transient = 42
-- drive: load; expect: is_transient: expected
max_attempts = 2
is_transient = 42 -- HERE
