-- C work: table.insert at 1 of a table whose __len is 2^63 - 2
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  return table.insert(setmetatable({}, { __len = function() return math.maxinteger - 1 end }), 1, 'x') -- HERE
end
