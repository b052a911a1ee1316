-- memory: info.call nested 100 tables deep
-- drive: classify; expect: nested more than 16 deep; where: is_transient: info.call
max_attempts = 3
function is_transient(status, body, info)
  if status ~= 503 then return false end
  local t = info.call
  for i = 1, 100 do t.next = {} t = t.next end
  return true
end
