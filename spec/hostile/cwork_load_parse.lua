-- C work: load of a 200 KB chunk, again and again
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  local src = ('local x = 1\n'):rep(20000) while true do load(src) end -- HERE
end
