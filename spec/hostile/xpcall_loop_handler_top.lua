-- xpcall: the same at the top of the script
-- drive: load; expect: time limit reached
max_attempts = 3
xpcall(function() while true do end end, function(m) while true do end end) -- HERE
