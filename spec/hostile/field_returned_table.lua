-- fields: return { max_attempts = 'x', deadline = {} }
-- drive: load; expect: max_attempts: expected; where: field_returned_table.lua
return { max_attempts = 'x', deadline = {} } -- HERE
