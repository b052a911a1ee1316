-- pcall: a loop that swallows its own errors forever
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  repeat local ok = pcall(error, "again") until ok -- HERE
end
