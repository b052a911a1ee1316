-- loops: the chunk spins on goto at load
-- drive: load; expect: time limit reached
max_attempts = 3
do ::top:: goto top end -- HERE
