-- errors: a __close that raises a table while another error unwinds
-- drive: classify; expect: error object is a table value
max_attempts = 3
local closer = setmetatable({}, { __close = function() error({}) end }) -- HERE
function is_transient(status)
  if status ~= 503 then return false end
  local c <close> = closer
  error("first")
end
