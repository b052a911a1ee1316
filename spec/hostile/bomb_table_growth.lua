-- memory: a table that grows without end
-- drive: classify; expect: memory limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  local t = {} while true do t[#t + 1] = {} end -- HERE
end
