-- spec/run/retry3.lua: a command policy that retries exit status 3 only.
name = "retry3"
max_attempts = 3
backoff = { kind = "constant", initial = 0.01, jitter = "none" }

function is_transient(status, body, info)
  return status == 3
end
