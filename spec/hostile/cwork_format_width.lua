-- C work: string.format with a width Lua refuses
-- drive: classify; expect: invalid conversion
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  return string.format('%099999d', 1) -- HERE
end
