-- C work: string.format with 100000 conversions and no values
-- drive: classify; expect: bad argument
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  return string.format(('%d'):rep(100000)) -- HERE
end
