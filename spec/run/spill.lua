-- spec/run/spill.lua: /size/N answers 503 with a 100,000-byte body once,
-- then 200 with N bytes of a fixed pattern (spec/files_spec.lua: bodies on
-- both sides of what standard output keeps in memory).
respond = function (req)
  local n = tonumber(req.path:match("^/size/(%d+)$"))
  if not n then return 404 end
  if req.count == 1 then return { status = 503, body = string.rep("x", 100000) } end
  return { status = 200, body = string.rep("0123456789abcdef", n // 16 + 1):sub(1, n) }
end
