-- callbacks: a table.sort comparator that is not an order
-- drive: classify; expect: invalid order function
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  local t = {}
  for i = 1, 200 do t[i] = (i * 7919) % 211 end
  table.sort(t, function() return true end) -- HERE
end
