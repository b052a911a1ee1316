max_attempts = 3
function is_transient() while true do pcall(function() while true do end end) end end
