-- errors: an error value that is a number
-- drive: classify; expect: error object is a number value
max_attempts = 3
function is_transient(status, body, info)
  if status ~= 503 then return false end
  error(42) -- HERE
end
