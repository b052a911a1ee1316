-- pcall: code after a pcall that swallowed a kill would try to go on
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  pcall(function() while true do end end) -- HERE
  return "escaped"
end
