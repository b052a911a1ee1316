-- __gc: on the shared string metatable, where Lua never finalizes
-- drive: harmless; expect: retry
max_attempts = 3
getmetatable("").__gc = function() while true do end end
function is_transient(status) collectgarbage() return status == 503 end
