-- returns: is_transient returns -1
-- drive: classify; expect: is_transient returned -1
max_attempts = 3
function is_transient(status) -- HERE
  if status ~= 503 then return false end
  return -1
end
