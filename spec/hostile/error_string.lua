-- errors: an error value that is a plain string
-- drive: classify; expect: plain failure
max_attempts = 3
function is_transient(status, body, info)
  if status ~= 503 then return false end
  error('plain failure') -- HERE
end
