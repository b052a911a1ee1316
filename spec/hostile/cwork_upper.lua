-- C work: s:upper() on 256 KB, again and again
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  local s = ('x'):rep(262144) while true do local u = s:upper() end -- HERE
end
