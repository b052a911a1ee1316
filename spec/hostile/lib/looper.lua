-- a module of spec/hostile/loop_required_module.lua: spin() never returns
local M = {}
function M.spin()
  while true do end
end
return M
