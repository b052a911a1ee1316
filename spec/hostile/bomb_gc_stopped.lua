-- memory: the collector stopped, garbage without end: live data stays small
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  collectgarbage("stop")
  while true do local t = { 1, 2, 3 } end -- HERE
end
