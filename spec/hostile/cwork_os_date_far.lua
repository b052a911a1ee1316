-- C work: os.date of a time far past any calendar
-- drive: classify; expect: cannot be represented|out-of-bounds|time
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  return os.date('*t', 2^60) -- HERE
end
