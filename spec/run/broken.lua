-- spec/run/broken.lua: is_transient raises a Lua error on line 7.
name = "broken"
max_attempts = 3
backoff = { initial = 0.01, jitter = "none" }

function is_transient(status, body, info)
  error("classifier exploded")
end
