-- callbacks: json.decode of arrays nested 100000 deep (refused past 256 levels, as bad JSON is: nil, position, message)
-- drive: classify; expect: nested deeper than 256 levels; where: json_deep_nesting.lua:7
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  local v, _, err = json.decode(("["):rep(100000) .. ("]"):rep(100000))
  if v == nil then error(err) end
  return true
end
