-- errors: an error value that is info, a userdata
-- drive: classify; expect: error object is a userdata value
max_attempts = 3
function is_transient(status, body, info)
  if status ~= 503 then return false end
  error(info) -- HERE
end
