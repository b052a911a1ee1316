-- errors: a run() workflow raises nil
-- drive: cli_run; expect: error object is a nil value
max_attempts = 2
function run(http, args)
  error() -- HERE
end
