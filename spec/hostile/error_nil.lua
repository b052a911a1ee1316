-- errors: an error value that is nil
-- drive: classify; expect: error object is a nil value
max_attempts = 3
function is_transient(status, body, info)
  if status ~= 503 then return false end
  error(nil) -- HERE
end
