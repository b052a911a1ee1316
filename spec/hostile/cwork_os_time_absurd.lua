-- C work: os.time of an absurd year
-- drive: classify; expect: out-of-bound|cannot be represented
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  return os.time{ year = 2^60, month = 1, day = 1 } -- HERE
end
