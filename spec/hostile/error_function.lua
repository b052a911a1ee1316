-- errors: an error value that is a function
-- drive: classify; expect: error object is a function value
max_attempts = 3
function is_transient(status, body, info)
  if status ~= 503 then return false end
  error(function() end) -- HERE
end
