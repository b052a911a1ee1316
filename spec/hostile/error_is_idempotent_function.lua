-- errors: is_idempotent raises a function
-- drive: idempotent; expect: error object is a function value
max_attempts = 3
function is_idempotent(request)
  if request.method == "POST" then error(print) end -- HERE
  return true
end
