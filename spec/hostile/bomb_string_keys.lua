-- memory: a hundred million interned keys
-- drive: classify; expect: memory limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  local t = {} for i = 1, 1e8 do t['k' .. i] = i end -- HERE
end
