-- C work: reverse and lower on 256 KB, again and again
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  local s = ('ab'):rep(131072) while true do s = s:reverse():lower() end -- HERE
end
