-- errors: a write to the read-only info
-- drive: classify; expect: info is read-only
max_attempts = 3
function is_transient(status, body, info)
  if status ~= 503 then return false end
  info.attempt = 99 -- HERE
end
