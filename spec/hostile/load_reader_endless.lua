-- callbacks: load() with a reader that never says the end
-- drive: load; expect: time limit reached|memory limit reached
max_attempts = 3
load(function() return "x = 1 " end) -- HERE
