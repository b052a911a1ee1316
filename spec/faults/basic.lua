-- The faults server's main test script: one route per behaviour.
local big = string.rep("x", 1000)

respond = routes{
  ["/flaky"] = sequence{503, 503, 200},
  ["/headers"] = {
    status = 201,
    headers = {["X-Test"] = "yes", ["Set-Cookie"] = {"a=1", "b=2"}},
    body = "hello body\n",
  },
  ["/slow"] = {delay = 1, body = "slow"},
  ["/fast"] = "fast",
  ["/reset"] = {reset = true},
  ["/hang"] = {hang = true},
  ["/truncate"] = {body = big, truncate = 100},
  ["/error"] = function (req) error("boom") end,
  ["/echo"] = function (req)
    req.state.seen = (req.state.seen or 0) + 1
    return {
      headers = {["Content-Type"] = "text/plain"},
      body = string.format("%s %s?%s count=%d total=%d seen=%d len=%d ct=%s",
                           req.method, req.path, req.query, req.count,
                           req.total, req.state.seen, #req.body,
                           tostring(req.headers["content-type"])),
    }
  end,
  default = function (req) return {status = 404, body = "nothing at " .. req.path} end,
}
