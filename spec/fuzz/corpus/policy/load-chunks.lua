max_attempts = 2
local f = load("return " .. ("1 + "):rep(100) .. "1")
local g = load(string.rep("local x = 1\n", 1000))
function is_transient() return f() > 0 and g == nil end
