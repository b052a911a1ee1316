-- callbacks: a pattern that backtracks without end on 60 KB
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  local s = ("a"):rep(60000)
  return s:find(".-.-.-.-b") ~= nil -- HERE
end
