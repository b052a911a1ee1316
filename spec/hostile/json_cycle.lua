-- callbacks: json.encode of a table that contains itself
-- drive: classify; expect: reference cycle
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  local t = {} t.self = t
  local s, err = json.encode(t) -- HERE
  error(err or s)
end
