-- loops: the chunk itself spins at load
-- drive: load; expect: time limit reached
max_attempts = 3
while true do end -- HERE
