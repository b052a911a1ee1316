-- loops: a backoff function spins on goto
-- drive: classify; expect: time limit reached
max_attempts = 3
function backoff(n, previous)
  ::again:: goto again -- HERE
end
