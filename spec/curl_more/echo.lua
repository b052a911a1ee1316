-- Echoes what it received (spec/curl_more_spec.lua): the body back, and
-- the request log (/_faults/requests) holds the rest.
local function echo(req)
  return {status = 200, body = req.body}
end

respond = routes{
  -- 503 (and a cookie) first, then the echo: what is sent again
  ["/once503"] = function (req)
    if req.count == 1 then
      return {status = 503, headers = {["Set-Cookie"] = "seen=1; Path=/"}, body = "busy\n"}
    end
    return echo(req)
  end,
  ["/slow"] = {status = 200, delay = 1.5, body = "slow\n"},
  default = echo,
}
