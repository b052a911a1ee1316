-- __gc: added to the metatable after setmetatable: never run, not even at close
-- drive: harmless; expect: retry
-- (Lua marks a table for finalization only when setmetatable sees __gc)
max_attempts = 3
local mt = {}
local t = setmetatable({}, mt)
mt.__gc = function() while true do end end
function is_transient(status)
  t = nil
  collectgarbage()
  return status == 503
end
