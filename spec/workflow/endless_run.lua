-- spec/workflow/endless_run.lua: a workflow whose GET meets an endless
-- body; it reports what http.get gave.
max_attempts = 1
deadline = 30
attempt_timeout = 20

function run(http, args)
  local r = http.get(args[1])
  return 200, ("status=%d error=%s detail=%s body=%d\n"):format(r.status, tostring(r.error),
                                                               tostring(r.error_detail), #r.body)
end
