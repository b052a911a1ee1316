-- pcall: a loop of pcalls of a memory bomb: the memory limit is sticky
-- drive: classify; expect: memory limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  while true do pcall(string.rep, "x", 1e9) end -- HERE
end
