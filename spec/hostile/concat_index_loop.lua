-- callbacks: table.concat reaches a looping __index
-- drive: classify; expect: time limit reached
max_attempts = 3
local t = setmetatable({}, { __index = function() while true do end end, -- HERE
                            __len = function() return 3 end })
function is_transient(status)
  if status ~= 503 then return false end
  return table.concat(t)
end
