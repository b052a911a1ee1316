max_attempts = 3
function is_transient() return xpcall(function() while true do end end, function(m) while true do end end) end
