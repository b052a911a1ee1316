-- errors: a backoff function raises a table
-- drive: classify; expect: error object is a table value
max_attempts = 3
function backoff(n, previous)
  error({ n = n }) -- HERE
end
