-- a module of spec/hostile/gc_required_module.lua: it sets a finalizer
local M = {}
setmetatable(M, { __gc = function() while true do end end })
return M
