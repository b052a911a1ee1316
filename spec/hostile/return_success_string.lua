-- returns: is_success returns 'true'
-- drive: classify; expect: is_success returned a string
max_attempts = 3
function is_success(status) -- HERE
  if status ~= 503 then return false end
  return 'true'
end
