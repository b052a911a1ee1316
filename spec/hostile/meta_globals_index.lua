-- metamethods: the globals' __index loops on an undefined name
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  return undefined_name
end
setmetatable(_G, { __index = function(_, k) while true do end end }) -- HERE
