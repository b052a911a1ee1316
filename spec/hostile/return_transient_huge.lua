-- returns: is_transient returns math.huge
-- drive: classify; expect: is_transient returned inf
max_attempts = 3
function is_transient(status) -- HERE
  if status ~= 503 then return false end
  return math.huge
end
