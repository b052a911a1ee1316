-- errors: an error value that is a table whose __tostring loops
-- drive: classify; expect: error object is a table value
max_attempts = 3
function is_transient(status, body, info)
  if status ~= 503 then return false end
  error(setmetatable({}, { __tostring = function() while true do end end })) -- HERE
end
