-- callbacks: gmatch over the body, again and again
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status, body)
  if status ~= 503 then return false end
  local s = (body .. " word"):rep(100)
  while true do for w in s:gmatch("%a+") do end end -- HERE
end
