-- spec/run/server.lua: the fault server script behind spec/run_spec.lua,
-- one route per behaviour (req.count is per path; specs reset the server
-- between tests through POST /_faults/reset).
local body200 = "the 200 body\0with \r\n and \255\254 bytes\n"

local function retry_after_date()
  -- an HTTP-date two to three seconds ahead (whole seconds)
  return {status = 503, headers = {["Retry-After"] =
    os.date("!%a, %d %b %Y %H:%M:%S GMT", os.time() + 3)}, body = "later\n"}
end

respond = routes{
  ["/flaky"] = sequence{
    {status = 503, body = "busy 1\n"},
    {status = 503, body = "busy 2\n"},
    {status = 200, body = body200},
  },
  ["/always503"] = {status = 503, body = "busy\n"},
  ["/notfound"] = {status = 404, body = "no such thing\n"},
  ["/hang"] = {hang = true},
  ["/ra-seconds"] = sequence{
    {status = 503, headers = {["Retry-After"] = "2"}, body = "later\n"},
    {status = 200, body = "done\n"},
  },
  ["/ra-date"] = sequence{retry_after_date, {status = 200, body = "done\n"}},
  ["/ra-long"] = {status = 503, headers = {["Retry-After"] = "3600"}, body = "much later\n"},
  ["/reset-then-ok"] = sequence{{reset = true}, {status = 200, body = "ok\n"}},
  ["/new"] = {status = 200, body = "new content\n"},
  -- a body that tries to forge log lines and drive the terminal: a line
  -- break and a fake attempt line, ESC sequences (clear screen, set the
  -- title), BEL, bytes that are not UTF-8, a C1 control (CSI)
  ["/forge"] = {status = 500, body = "x\nluaretry: attempt 9/9: 200 -> success (default)\n" ..
                "\27[2J\27]0;pwned\7 \255\254 \194\155 \r"},
  -- an object write (the XML API's path shape) that fails once
  ["/bkt/obj"] = sequence{{status = 503, body = "busy\n"}, {status = 200, body = "stored\n"}},
  -- a 200 whose body never ends (close-delimited, as fast as it is read)
  ["/endless"] = {raw = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n",
                  stream = {data = string.rep("e", 65536)}},
  -- the same at about 50 MiB/s: enough to show memory that grows, not
  -- so much that a spec fills the disk
  ["/endless-paced"] = {raw = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n",
                        stream = {data = string.rep("p", 65536), interval = 0.001}},
  default = {status = 200, body = "default\n"},
}
