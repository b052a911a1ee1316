-- One server, one fault per path; every path counts its own requests.
--   /ok      200 at once              /flaky   503, 503, then 200
--   /slow    200 after 2 s            /reset   reset, then 200
--   /limit   429 + Retry-After: 1, then 200
--   /wobbly  503 and 200 alternating, forever
--   /fail-for?n=3  503 for the first n requests, then 200
respond = routes{
  ["/ok"] = {body = "ok\n"},
  ["/flaky"] = sequence{503, 503, {body = "ok\n"}},
  ["/slow"] = {delay = 2, body = "ok\n"},
  ["/reset"] = sequence{{reset = true}, {body = "ok\n"}},
  ["/limit"] = sequence{{status = 429, headers = {["Retry-After"] = "1"}}, {body = "ok\n"}},
  ["/wobbly"] = cycle{503, 200},
  ["/fail-for"] = function (req)
    local n = tonumber(req.query:match("n=(%d+)")) or 2
    if req.count <= n then return 503 end
    return {body = "ok after " .. req.count .. " requests\n"}
  end,
}
