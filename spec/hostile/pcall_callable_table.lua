-- pcall: of a table whose __call loops
-- drive: classify; expect: time limit reached
max_attempts = 3
local callable = setmetatable({}, { __call = function() while true do end end }) -- HERE
function is_transient(status)
  if status ~= 503 then return false end
  return pcall(callable)
end
