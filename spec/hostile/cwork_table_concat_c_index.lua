-- C work: table.concat over 2^63 elements an __index in C answers with ""
-- drive: classify; expect: time limit reached
max_attempts = 3
local t = setmetatable({}, { __index = table.concat })
function is_transient(status)
  if status ~= 503 then return false end
  return table.concat(t, "", 1, math.maxinteger) -- HERE
end
