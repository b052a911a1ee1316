-- __gc: a finalizer that would loop, set in is_transient
-- drive: classify; expect: __gc is not allowed
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  setmetatable({}, { __gc = function() while true do end end }) -- HERE
  collectgarbage()
end
