-- loops: a chunk made by load() spins at load
-- drive: load; expect: time limit reached; where: spinner:1
max_attempts = 3
load("while true do end", "=spinner")()
