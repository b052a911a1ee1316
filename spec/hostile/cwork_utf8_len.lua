-- C work: utf8.len of 1 MB, again and again
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  local s = ('\u{e9}'):rep(5e5) while true do local n = utf8.len(s) end -- HERE
end
