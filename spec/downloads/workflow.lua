-- A workflow whose request stalls (spec/downloads_spec.lua): its http.get
-- is bounded by stall_timeout as run URL's requests are.
name = "stall-workflow"
max_attempts = 3
deadline = 60
stall_timeout = 1
stall_speed = 10
backoff = { initial = 0.01, jitter = "none" }

function run(http, args)
  local r = http.get(args[1])
  return r.status, r.body
end
