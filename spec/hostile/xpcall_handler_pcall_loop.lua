-- xpcall: a message handler that loops on pcall(error)
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  return xpcall(error, function(m) while true do pcall(error, m) end end) -- HERE
end
