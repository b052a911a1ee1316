-- returns: run() returns 2^32 + 200, which must not read as 200
-- drive: cli_run; expect: run returned status 4294967496: a status is from 0 to 999; where: run: 
max_attempts = 2
function run(http, args)
  return (1 << 32) + 200, "ok"
end
