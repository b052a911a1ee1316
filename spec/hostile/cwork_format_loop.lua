-- C work: string.format on a growing string, again and again
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  local s = 'x' while true do s = string.format('%s%5.2f%q', s, 1.5, 'q'):sub(1, 100000) end -- HERE
end
