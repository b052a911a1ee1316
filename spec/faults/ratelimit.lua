-- Rate-limit answers and a POST counter, for spec/ratelimit_spec.lua: each
-- path answers once with a quota signal (or 503), then 200.
local function limited(status, headers)
  return sequence { { status = status, headers = headers, body = "slow down\n" }, "ok\n" }
end

local function epoch(req)
  -- the reset as epoch seconds, 3 s ahead of the first answer (whole seconds:
  -- 2 to 3 s from the client's reading, less any delay on a busy machine)
  req.state.reset = req.state.reset or os.time() + 3
  if req.count == 1 then
    return { status = 429, headers = { ["X-RateLimit-Remaining"] = "0",
                                       ["X-RateLimit-Reset"] = tostring(req.state.reset) } }
  end
  return "ok\n"
end

respond = routes {
  ["/ietf"] = limited(429, { RateLimit = '"default";r=0;t=1' }),
  ["/ietf503"] = limited(503, { RateLimit = '"burst";r=5;t=9, "default";r=0;t=1' }),
  ["/xdelta"] = limited(429, { ["X-RateLimit-Remaining"] = "0", ["X-RateLimit-Reset"] = "1" }),
  ["/xepoch"] = epoch,
  ["/quota403"] = limited(403, { ["X-RateLimit-Remaining"] = "0", ["X-RateLimit-Reset"] = "1" }),
  ["/after403"] = limited(403, { ["Retry-After"] = "1" }),
  ["/plain403"] = limited(403, { ["X-RateLimit-Remaining"] = "12" }),
  ["/far"] = limited(429, { RateLimit = '"default";r=0;t=600' }),
  ["/garbage"] = limited(429, { RateLimit = '"default";r=0;t=-4',
                                ["X-RateLimit-Remaining"] = "0", ["X-RateLimit-Reset"] = "soon" }),
  ["/busy"] = sequence { 503, "ok\n" },
}
