-- callbacks: table.sort's own comparison reaches a looping __lt
-- drive: classify; expect: time limit reached
max_attempts = 3
local mt = { __lt = function() while true do end end } -- HERE
function is_transient(status)
  if status ~= 503 then return false end
  local t = { setmetatable({}, mt), setmetatable({}, mt), setmetatable({}, mt) }
  table.sort(t)
end
