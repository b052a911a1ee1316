-- spec/hostile_server/server.lua: the hostile server corpus, one route per
-- misbehaviour (spec/hostile_server_spec.lua says what each must give).
-- `raw` sends bytes as they are, `stream` repeats them, `then_reset` ends
-- with a TCP reset.
local CRLF = "\r\n"
local function head(lines) return table.concat(lines, CRLF) .. CRLF .. CRLF end
local ok_head = "HTTP/1.1 200 OK" .. CRLF

-- 503 with one Retry-After value, as it came
local function retry_after(value)
  return {raw = head{"HTTP/1.1 503 Service Unavailable", "Retry-After: " .. value,
                     "Content-Length: 5", "Connection: close"} .. "busy\n"}
end

-- 300 headers, then Retry-After: 1 (past where a fixed table of 128 ends)
local many = {"HTTP/1.1 503 Service Unavailable"}
for i = 1, 300 do many[#many + 1] = ("X-Filler-%03d: %s"):format(i, ("v"):rep(40)) end
many[#many + 1] = "Retry-After: 1"
many[#many + 1] = "Content-Length: 5"

respond = routes{
  -- connections that break
  ["/reset-mid-body"] = {raw = head{"HTTP/1.1 200 OK", "Content-Length: 100000"} .. ("r"):rep(5000),
                         then_reset = true},
  ["/fin-mid-body"] = {body = ("f"):rep(100000), truncate = 5000},
  ["/reset-mid-stream"] = {raw = head{"HTTP/1.1 200 OK"},
                           stream = {data = ("s"):rep(65536), count = 40}, then_reset = true},
  -- heads that never end, or are too big
  ["/endless-headers"] = {raw = ok_head, stream = {data = "X-Junk: " .. ("j"):rep(60) .. CRLF}},
  ["/endless-body"] = {raw = head{"HTTP/1.1 200 OK"}, stream = {data = ("e"):rep(65536),
                                                                interval = 0.001}},
  ["/huge-header"] = {raw = ok_head .. "X-Huge: ", stream = {data = ("h"):rep(65536), count = 64}},
  ["/endless-continue"] = {raw = "", stream = {data = "HTTP/1.1 100 Continue" .. CRLF .. CRLF}},
  -- status lines that are not
  ["/bad-status"] = {raw = head{"HTTP/1.1 abc Weird", "Content-Length: 0"}},
  ["/bad-version"] = {raw = head{"HTTP/7.3 200 OK", "Content-Length: 0"}},
  ["/status-999"] = {raw = head{"HTTP/1.1 999 Whatever", "Content-Length: 0"}},
  ["/http09"] = {raw = "just a body, no status line at all\n"},
  ["/nul-in-head"] = {raw = "HTTP/1.1 200 OK\r\nX-A: b\0c\r\nContent-Length: 2\r\n\r\nok"},
  -- bodies that misbehave
  ["/slow-body"] = {raw = head{"HTTP/1.1 200 OK", "Content-Length: 1000"},
                    stream = {data = "d", count = 1000, interval = 0.05}},
  ["/drip-forever"] = {raw = head{"HTTP/1.1 200 OK"}, stream = {data = "d", interval = 0.2}},
  ["/bad-chunk-size"] = {raw = head{"HTTP/1.1 200 OK", "Transfer-Encoding: chunked"} ..
                         "zz" .. CRLF .. "abc" .. CRLF .. "0" .. CRLF .. CRLF},
  ["/huge-chunk-size"] = {raw = head{"HTTP/1.1 200 OK", "Transfer-Encoding: chunked"} ..
                          "ffffffffffffffffff" .. CRLF .. "abc" .. CRLF},
  ["/endless-chunks"] = {raw = head{"HTTP/1.1 200 OK", "Transfer-Encoding: chunked"},
                         stream = {data = "10000" .. CRLF .. ("c"):rep(65536) .. CRLF,
                                   interval = 0.001}},
  ["/bad-length"] = {raw = head{"HTTP/1.1 200 OK", "Content-Length: -5"} .. "x"},
  ["/two-lengths"] = {raw = head{"HTTP/1.1 200 OK", "Content-Length: 2", "Content-Length: 9"} .. "ok"},
  ["/redirect-loop"] = {raw = head{"HTTP/1.1 302 Found", "Location: /redirect-loop",
                                   "Content-Length: 0"}},
  -- Retry-After, every way wrong (and right after 300 headers)
  ["/ra-empty"] = retry_after(""),
  ["/ra-word"] = retry_after("soon"),
  ["/ra-negative"] = retry_after("-5"),
  ["/ra-fraction"] = retry_after("1.5"),
  ["/ra-hex"] = retry_after("0x10"),
  ["/ra-exponent"] = retry_after("1e3"),
  ["/ra-overflow"] = retry_after("99999999999999999999999999"),
  ["/ra-bad-date"] = retry_after("Mon, 32 Foo 2024 25:61:61 GMT"),
  ["/ra-past-date"] = retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
  ["/ra-binary"] = retry_after("\255\254\1\2"),
  ["/ra-huge"] = retry_after(("9"):rep(60000)),
  ["/ra-after-300-headers"] = sequence{{raw = head(many) .. "busy\n"}, {status = 200, body = "done\n"}},
  ["/ra-far"] = retry_after("86400"),
}
