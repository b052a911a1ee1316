-- pcall: an error inside pcall whose __close loops while unwinding
-- drive: classify; expect: time limit reached
max_attempts = 3
local spin = setmetatable({}, { __close = function() while true do end end }) -- HERE
function is_transient(status)
  if status ~= 503 then return false end
  return pcall(function() local c <close> = spin error("x") end)
end
