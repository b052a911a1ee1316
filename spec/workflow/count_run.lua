-- run() that answers 503 twice, then 200 with its arguments joined
max_attempts = 5
backoff = { initial = 0.01, jitter = "none" }
local runs = 0
function run(http, args)
  runs = runs + 1
  if runs < 3 then return 503, "busy " .. runs end
  return 200, table.concat(args, "+") .. "\n"
end
