-- xpcall: a message handler that itself fails, every time
-- drive: classify; expect: error
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  local ok, e = xpcall(error, function(m) error(m) end, "x")
  error(tostring(e)) -- HERE
end
