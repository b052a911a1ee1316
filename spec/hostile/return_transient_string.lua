-- returns: is_transient returns 'yes'
-- drive: classify; expect: is_transient returned a string
max_attempts = 3
function is_transient(status) -- HERE
  if status ~= 503 then return false end
  return 'yes'
end
