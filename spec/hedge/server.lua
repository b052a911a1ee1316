-- The fault server of hedge_spec.lua: each path a story of a slow attempt
-- and its hedges (counts are per path: request 1 is the original).
local big_a, big_b = string.rep("A", 200000), string.rep("B", 200000)

respond = routes{
  -- the original is slow, every later request fast
  ["/slow-first"] = function (req)
    return {delay = req.count == 1 and 1 or 0, body = "body" .. req.count}
  end,
  -- the original answers after 0.6 s; every hedge fails at once
  ["/hedge-fails"] = function (req)
    if req.count == 1 then return {delay = 0.6, body = "original"} end
    return {status = 503, body = "busy"}
  end,
  -- an overload: every request takes 0.6 s
  ["/all-slow"] = latency{"slow", base = 0.6},
  -- the original (0.3 s) and the hedge (sent at 0.1 s, 0.2 s) answer at once
  ["/both"] = function (req)
    if req.count == 1 then return {delay = 0.3, body = big_a} end
    return {delay = 0.2, body = big_b}
  end,
  ["/hang"] = {hang = true},
  -- batches: /b/N, odd N slow on its first request
  default = function (req)
    local n = tonumber(req.path:match("^/b/(%d+)$"))
    if not n then return 404 end
    if n % 2 == 1 and req.count == 1 then return {delay = 1, body = "slow" .. n} end
    return "fast" .. n .. "-" .. req.count
  end,
  -- the body and X-Attempt prepare() gave; attempt 1 answers in 0.3 s, a
  -- hedge in 2 s: the original wins after its hedge was prepared
  ["/prepared"] = function (req)
    local n = req.headers["x-attempt"]
    return {delay = n == "1" and 0.3 or 2, body = req.method .. " " .. req.body .. " " .. tostring(n)}
  end,
}
