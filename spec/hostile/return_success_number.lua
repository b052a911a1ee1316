-- returns: is_success returns 1
-- drive: classify; expect: is_success returned a number
max_attempts = 3
function is_success(status) -- HERE
  if status ~= 503 then return false end
  return 1
end
