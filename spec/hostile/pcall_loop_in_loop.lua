-- pcall: a loop of pcalls of a loop: the kill is not swallowed
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  while true do pcall(function() while true do end end) end -- HERE
end
