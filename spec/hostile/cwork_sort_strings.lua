-- C work: table.sort, no comparator, of one 1 MiB string 20000 times: each comparison scans it whole
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  local s, t = string.rep("x", 1 << 20), {} for i = 1, 20000 do t[i] = s end table.sort(t) -- HERE
end
