max_attempts = 3
function is_transient(status, body)
  local s = string.format("%5.2f %q %s %x", 1/3, body, status, status)
  local t = { s:byte(1, -1) }
  local u = utf8.char(72, 228, 8364) .. os.date("!%Y-%m-%dT%H:%M:%S", 0)
  return #table.concat(t, ",") > 0 and #u > 0 and s:gsub("%d", "#") ~= nil
end
