-- spec/run/error_body.lua: final answers with a body that says why.
--   /missing   404, a JSON reason on its first line, more lines after
--   /forged    403, a first line with a terminal escape and no line end
--   /gone      503 every time
--   /ok        200
--   /cookie    200 with a Set-Cookie and a Location holding user:password
respond = routes{
  ["/missing"] = {status = 404, body = '{"error":"no such bucket"}\nsecond line\n'},
  ["/forged"] = {status = 403, body = "denied\27[2J" .. ("x"):rep(300)},
  ["/gone"] = {status = 503, body = "try later\n"},
  ["/ok"] = {body = "fresh\n"},
  ["/cookie"] = {headers = {["Set-Cookie"] = "sid=abc123secret; Path=/",
                            ["Content-Location"] = "http://carol:letmein@127.0.0.1/elsewhere"},
                 body = "fresh\n"},
}
