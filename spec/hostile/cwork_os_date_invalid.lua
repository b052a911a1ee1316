-- C work: os.date with a conversion it does not know
-- drive: classify; expect: invalid conversion specifier
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  return os.date('%Q') -- HERE
end
