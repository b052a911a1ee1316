-- metamethods: the shared string metatable's __index loops (this state only)
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status, body)
  if status ~= 503 then return false end
  getmetatable("").__index = function() while true do end end -- HERE
  return body:len() > 0
end
