-- errors: an error value that is a boolean
-- drive: classify; expect: error object is a boolean value
max_attempts = 3
function is_transient(status, body, info)
  if status ~= 503 then return false end
  error(false) -- HERE
end
