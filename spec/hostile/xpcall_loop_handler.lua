-- xpcall: a looping function whose message handler loops too
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  return xpcall(function() while true do end end, function(m) while true do end end) -- HERE
end
