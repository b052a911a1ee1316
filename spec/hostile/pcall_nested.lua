-- pcall: a loop under 150 nested pcalls
-- drive: classify; expect: time limit reached
max_attempts = 3
local function spin() while true do end end -- HERE
local function nest(n) if n == 0 then return spin() end return pcall(nest, n - 1) end
function is_transient(status)
  if status ~= 503 then return false end
  return nest(150)
end
