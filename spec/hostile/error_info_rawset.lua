-- errors: rawset on info, a userdata
-- drive: classify; expect: table expected
max_attempts = 3
function is_transient(status, body, info)
  if status ~= 503 then return false end
  rawset(info, "attempt", 99) -- HERE
end
