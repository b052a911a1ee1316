-- spec/run/error_body.lua: final answers with a body that says why.
--   /missing   404, a JSON reason on its first line, more lines after
--   /forged    403, a first line with a terminal escape and no line end
--   /gone      503 every time
--   /ok        200
respond = routes{
  ["/missing"] = {status = 404, body = '{"error":"no such bucket"}\nsecond line\n'},
  ["/forged"] = {status = 403, body = "denied\27[2J" .. ("x"):rep(300)},
  ["/gone"] = {status = 503, body = "try later\n"},
  ["/ok"] = {body = "fresh\n"},
}
