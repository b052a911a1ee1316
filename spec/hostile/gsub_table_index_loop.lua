-- callbacks: a gsub replacement table whose __index loops
-- drive: classify; expect: time limit reached
max_attempts = 3
local repl = setmetatable({}, { __index = function() while true do end end }) -- HERE
function is_transient(status)
  if status ~= 503 then return false end
  return ("abc"):gsub("%a", repl)
end
