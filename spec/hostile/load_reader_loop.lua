-- callbacks: load() with a reader function that loops
-- drive: load; expect: time limit reached
max_attempts = 3
load(function() while true do end end) -- HERE
