-- returns: is_idempotent returns 'no'
-- drive: idempotent; expect: is_idempotent returned a string
max_attempts = 3
function is_idempotent(request) -- HERE
  if request.method ~= 'POST' then return true end
  return 'no'
end
