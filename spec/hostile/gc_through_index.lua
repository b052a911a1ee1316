-- __gc: offered through the metatable's own __index (Lua reads it raw)
-- drive: harmless; expect: retry
max_attempts = 3
local spin = function() while true do end end
local t = setmetatable({}, setmetatable({}, { __index = { __gc = spin } }))
function is_transient(status) t = nil collectgarbage() return status == 503 end
