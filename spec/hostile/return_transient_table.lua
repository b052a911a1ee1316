-- returns: is_transient returns { retry = true }
-- drive: classify; expect: is_transient returned a table
max_attempts = 3
function is_transient(status) -- HERE
  if status ~= 503 then return false end
  return { retry = true }
end
