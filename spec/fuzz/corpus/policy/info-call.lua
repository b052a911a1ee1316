max_attempts = 6
function is_transient(status, body, info)
  local c = info.call
  c.n = (c.n or 0) + 1
  c.seen = c.seen or {}
  c.seen[#c.seen + 1] = { status = status, attempt = info.attempt, e = info.elapsed }
  return c.n < 4
end
