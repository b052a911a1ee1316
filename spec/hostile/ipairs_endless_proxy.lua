-- callbacks: ipairs over a proxy whose __index never returns nil
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  for i in ipairs(setmetatable({}, { __index = function(_, i) return i end })) do end -- HERE
end
