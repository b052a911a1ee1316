-- returns: run() returns a string status and a table body
-- drive: cli_run; expect: run must return status, body; where: run: 
max_attempts = 2
function run(http, args)
  return "200", {}
end
