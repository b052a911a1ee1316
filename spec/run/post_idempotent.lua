-- spec/run/post_idempotent.lua: every request may be repeated (as with an
-- idempotency key); the default classifier, short waits.
name = "post_idempotent"
max_attempts = 3
deadline = 20
backoff = { initial = 0.05, jitter = "none" }

function is_idempotent(request)
  return true
end
