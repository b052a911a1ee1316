-- memory: utf8.char repeated
-- drive: classify; expect: memory limit reached
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  return #utf8.char(0x10FFFF):rep(1e8) -- HERE
end
