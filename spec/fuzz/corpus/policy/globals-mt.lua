max_attempts = 3
setmetatable(_G, { __index = function(_, k) error("undefined global " .. k) end })
function is_transient(status) return undefined_name end
