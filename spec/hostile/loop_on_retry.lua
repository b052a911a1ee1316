-- loops: on_retry spins over a numeric for to math.maxinteger
-- drive: retry_hook; expect: time limit reached
max_attempts = 3
function on_retry(info)
  for i = 1, math.maxinteger do end -- HERE
end
