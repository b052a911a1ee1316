-- C work: table.sort of 100000 integers by a C function (math.ult), no Lua code between comparisons
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  local t = {} for i = 1, 100000 do t[i] = (i * 7919) % 100003 end while true do table.sort(t, math.ult) table.sort(t, function(a, b) return a > b end) end -- HERE
end
