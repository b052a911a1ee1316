-- memory: table.concat of a million strings
-- drive: classify; expect: memory limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  local t = {} for i = 1, 1e7 do t[i] = 'abcdefgh' .. i end return table.concat(t) -- HERE
end
