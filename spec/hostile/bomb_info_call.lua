-- memory: info.call holding megabytes between attempts
-- drive: classify; expect: info.call holds more than 1048576 bytes; where: is_transient: info.call
max_attempts = 3
function is_transient(status, body, info)
  if status ~= 503 then return false end
  info.call.blob = ("x"):rep(2e6)
  return true
end
