-- spec/cli/curl_server.lua: the fault server behind spec/curl_options_spec.lua.
-- GZIP_BODY is set by the spec's copy of this file (gzip's bytes of
-- "squeezed\n").
local gzip_body = GZIP_BODY or ""

respond = routes{
  ["/ok"] = {status = 200, body = "ok\n"},
  ["/headers"] = {status = 201, headers = {["X-Thing"] = "one", Location = "/upload/session-42"},
                  body = "created\n"},
  ["/flaky"] = sequence{
    {status = 503, headers = {["X-Attempt"] = "first"}, body = "busy\n"},
    {status = 200, headers = {["X-Attempt"] = "second"}, body = "done\n"},
  },
  ["/missing"] = {status = 404, body = "no such thing\n"},
  ["/auth"] = function (req)
    if req.headers.authorization == "Basic dXNlcjpzM2NyZXQ=" then return {status = 200, body = "welcome\n"} end
    return {status = 401, body = "who are you?\n"}
  end,
  -- 302 to the URL in the query: /redirect?http://127.0.0.2:PORT/landing
  ["/redirect"] = function (req)
    return {status = 302, headers = {Location = req.query}, body = "moved\n"}
  end,
  ["/loop"] = {status = 302, headers = {Location = "/loop"}, body = "again\n"},
  ["/landing"] = {status = 200, body = "landed\n"},
  ["/gzip"] = function (req)
    if (req.headers["accept-encoding"] or ""):find("gzip", 1, true) then
      return {status = 200, headers = {["Content-Encoding"] = "gzip"}, body = gzip_body}
    end
    return {status = 200, body = "squeezed\n"}
  end,
  ["/slow"] = {delay = 3, status = 200, body = "late\n"},
  default = {status = 200, body = "default\n"},
}
