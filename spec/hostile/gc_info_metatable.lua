-- __gc: setmetatable on info, the read-only userdata
-- drive: classify; expect: __gc is not allowed|table expected
max_attempts = 3
function is_transient(status, body, info)
  if status ~= 503 then return false end
  setmetatable(info, { __gc = function() while true do end end }) -- HERE
end
