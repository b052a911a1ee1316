-- callbacks: a looping comparator at load
-- drive: load; expect: time limit reached
max_attempts = 3
local t = { 3, 2, 1 }
table.sort(t, function(a, b) while true do end end) -- HERE
