-- memory: a bomb inside pcall, again and again: the kill is sticky
-- drive: classify; expect: memory limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  while true do pcall(function() local t = {} for i = 1, 1e7 do t[i] = i end end) end -- HERE
end
