-- memory: info.call holding a function, which cannot outlive the state
-- drive: classify; expect: cannot be kept between attempts; where: is_transient: info.call.f
max_attempts = 3
function is_transient(status, body, info)
  if status ~= 503 then return false end
  info.call.f = print
  return true
end
