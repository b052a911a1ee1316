-- errors: error(msg, 2) from a helper names its caller
-- drive: classify; expect: bad status
max_attempts = 3
local function check(s) if s == 503 then error("bad status " .. s, 2) end end
function is_transient(status)
  check(status) -- HERE
  return false
end
