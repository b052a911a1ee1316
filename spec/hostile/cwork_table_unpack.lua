-- C work: table.unpack of a hundred million values
-- drive: classify; expect: too many results
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  return table.unpack({}, 1, 1e8) -- HERE
end
