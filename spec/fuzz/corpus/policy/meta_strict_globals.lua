-- metamethods: strict globals (an __index that raises on an undefined name) load and work
-- drive: harmless; expect: retry
max_attempts = 3
function is_transient(status) return status == 503 end
setmetatable(_G, { __index = function(_, k) error("undefined global " .. k, 2) end,
                   __newindex = function(_, k) error("new global " .. k, 2) end })
