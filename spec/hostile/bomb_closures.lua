-- memory: closures without end
-- drive: classify; expect: memory limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  local fs = {} while true do local n = #fs fs[n + 1] = function() return n end end -- HERE
end
