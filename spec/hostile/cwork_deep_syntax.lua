-- C work: load of a chunk nested 100000 levels deep
-- drive: classify; expect: too many|overflow
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  local f, e = load(('('):rep(100000) .. '1' .. (')'):rep(100000)) error(e) -- HERE
end
