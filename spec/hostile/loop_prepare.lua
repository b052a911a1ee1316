-- loops: prepare spins before the first attempt
-- drive: cli_prepare; expect: time limit reached
max_attempts = 2
function prepare(request, attempt)
  while true do request.headers.x = attempt end -- HERE
end
