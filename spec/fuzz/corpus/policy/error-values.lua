max_attempts = 3
function is_transient(status)
  if status == 503 then error({ code = 1 }) end
  if status == 429 then error(nil) end
  if status == 0 then error(setmetatable({}, { __tostring = function() while true do end end })) end
  error(function() end)
end
