-- loops: is_idempotent spins for a POST
-- drive: idempotent; expect: time limit reached
max_attempts = 3
function is_idempotent(request)
  if request.method ~= "POST" then return true end
  while true do end -- HERE
end
