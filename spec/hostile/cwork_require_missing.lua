-- C work: require of a missing module, again and again
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  while true do pcall(require, 'no_such_module') end -- HERE
end
