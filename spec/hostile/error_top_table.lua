-- errors: a table raised at load
-- drive: load; expect: error object is a table value
max_attempts = 3
error(setmetatable({}, { __tostring = function() while true do end end })) -- HERE
