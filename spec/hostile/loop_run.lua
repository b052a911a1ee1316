-- loops: a run() workflow spins
-- drive: cli_run; expect: time limit reached
max_attempts = 2
function run(http, args)
  local n = 0
  while true do n = n + 1 end -- HERE
end
