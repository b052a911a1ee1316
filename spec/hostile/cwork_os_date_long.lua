-- C work: os.date with half a million %c conversions
-- drive: classify; expect: memory limit reached|time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  return #os.date(('%c'):rep(5e5)) -- HERE
end
