-- callbacks: a table.sort comparator that loops
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  local t = { 5, 3, 1, 4, 2 }
  table.sort(t, function(a, b) while true do end end) -- HERE
end
