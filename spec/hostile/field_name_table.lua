-- fields: max_attempts = 2 name = {}
-- drive: load; expect: name: expected a string
max_attempts = 2
name = {} -- HERE
