-- returns: is_transient returns print
-- drive: classify; expect: is_transient returned a function
max_attempts = 3
function is_transient(status) -- HERE
  if status ~= 503 then return false end
  return print
end
