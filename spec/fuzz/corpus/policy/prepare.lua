max_attempts = 3
function is_idempotent(request)
  return request.method ~= "POST" or request.headers["Idempotency-Key"] ~= nil
end
function prepare(request, attempt, info)
  request.headers["Idempotency-Key"] = request.headers["Idempotency-Key"] or ("key-" .. attempt)
  request.headers["X-Attempt"] = tostring(attempt)
  if attempt > 1 then request.url = "https://mirror.example.com/x" end
  info.call.prepared = attempt
  return request
end
