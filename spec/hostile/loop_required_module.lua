-- loops: a function of a required module (lib/looper.lua) spins
-- drive: classify; expect: time limit reached; where: looper.lua:4
local looper = require "lib.looper"
max_attempts = 3
function is_transient(status)
  if status == 503 then looper.spin() end
  return false
end
