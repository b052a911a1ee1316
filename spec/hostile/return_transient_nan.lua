-- returns: is_transient returns 0/0
-- drive: classify; expect: is_transient returned
max_attempts = 3
function is_transient(status) -- HERE
  if status ~= 503 then return false end
  return 0/0
end
