-- spec/fleet/fake_redis.lua: a Redis that speaks RESP badly, for
-- spec/fleet_hostile_spec.lua.  lua5.4 fake_redis.lua MODE DIR: listens on
-- 127.0.0.1 (a free port, written to DIR/port), answers AUTH, SELECT, PING
-- and SCRIPT LOAD as Redis would, and the fleet's EVALSHA/EVAL as MODE
-- says; every command's name is appended to DIR/log.  Runs until killed.
--
-- MODE: good, silent, silent-after-first, half-open-then-silent, endless-line, huge-array,
-- negative-count, nested, nil, nil-elements, tokens-above-max,
-- open-in-future, overflow, auth-echo, slow (every reply 400 ms late);
-- for the rate limiter's script (EVAL with one key; the budget's goes
-- well): rate-garbage (more slots than asked), rate-nil, rate-silent,
-- rate-slow (its replies 3 s late).
local socket = require "socket"

local MODE, DIR = arg[1], arg[2]
local SHA = ("0123456789abcdef"):rep(3):sub(1, 40)

local function now_ms() return math.floor(socket.gettime() * 1000) end

local function log(line)
  local f = io.open(DIR .. "/log", "a")
  f:write(line, "\n")
  f:close()
end

local function bulk(s) return "$" .. #s .. "\r\n" .. s .. "\r\n" end

-- The update script's answer: tokens state fails opened_at probes_left granted now
local function answer(t)
  local out = { "*" .. #t .. "\r\n" }
  for _, v in ipairs(t) do out[#out + 1] = ":" .. v .. "\r\n" end
  return table.concat(out)
end

local evals = 0

-- What the rate limiter's script gets (after SCRIPT LOAD): nil, no answer.
local function on_rate(argv)
  local want = tonumber(argv[7]) or 1
  local now_us = math.floor(socket.gettime() * 1e6)
  if MODE == "rate-garbage" then return answer { want + 5, now_us, now_us, 0 } end
  if MODE == "rate-nil" then return "$-1\r\n" end
  if MODE == "rate-slow" then return answer { 1, now_us, now_us, 0 }, nil, 3 end
  return nil
end

-- What the fleet's update gets.  A function: bytes to stream for ever.
local function on_eval(argv)
  if argv[3] == "1" then return on_rate(argv) end
  evals = evals + 1
  local max = tonumber(argv[6]) or 10000
  local good = answer { max, 0, 0, 0, 0, 0, now_ms() }
  if MODE == "good" or MODE == "slow" or MODE:match("^rate%-") then return good end
  if MODE == "silent" then return nil end
  if MODE == "silent-after-first" then return evals == 1 and good or nil end
  if MODE == "half-open-then-silent" then
    return evals == 1 and answer { max, 2, 0, now_ms() - 10, 1, 0, now_ms() } or nil
  end
  if MODE == "endless-line" then
    local chunk = ("a"):rep(65536)
    return "+", function () return chunk end
  end
  if MODE == "huge-array" then
    local chunk = (":1\r\n"):rep(16384)
    return "*2000000000\r\n", function () return chunk end
  end
  if MODE == "negative-count" then return "*2147483655\r\n:1\r\n:1\r\n:1\r\n" end
  if MODE == "nested" then return ("*1\r\n"):rep(6) .. ":1\r\n" end
  if MODE == "nil" then return "$-1\r\n" end
  if MODE == "nil-elements" then return "*7\r\n$-1\r\n*-1\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n" end
  if MODE == "tokens-above-max" then return answer { max * 100, 0, 0, 0, 0, 0, now_ms() } end
  if MODE == "open-in-future" then
    return answer { max, 1, 99, now_ms() + 3600000, 0, 0, now_ms() }
  end
  if MODE == "overflow" then
    return "*7\r\n:9223372036854775807\r\n:0\r\n:-9223372036854775808\r\n" ..
           ":-9223372036854775808\r\n:0\r\n:0\r\n:-9223372036854775808\r\n"
  end
  return "-ERR unknown mode\r\n"
end

local function on_command(argv)
  local name = (argv[1] or ""):upper()
  log(name .. ((name == "EVAL" or name == "EVALSHA") and argv[3] == "1" and " rate" or ""))
  if name == "AUTH" then
    if MODE == "auth-echo" then
      return "-ERR AUTH " .. argv[#argv] .. " called without any password configured " ..
             "for the default user. Are you sure your configuration is correct?\r\n"
    end
    return "+OK\r\n"
  end
  if name == "SELECT" then return "+OK\r\n" end
  if name == "PING" then return "+PONG\r\n" end
  if name == "SCRIPT" then return bulk(SHA) end
  if name == "EVALSHA" or name == "EVAL" then return on_eval(argv) end
  if name == "TIME" then
    local t = socket.gettime()
    return "*2\r\n" .. bulk(tostring(math.floor(t))) .. bulk("0")
  end
  if name == "HMGET" then return "*7\r\n" .. ("$-1\r\n"):rep(7) end
  if name == "ZREVRANGE" then return "*0\r\n" end
  if name == "DEL" then return ":0\r\n" end
  return "-ERR unknown command\r\n"
end

-- One command from buf (an array of bulk strings), or nil when incomplete.
local function parse(buf)
  local n, at = buf:match("^%*(%d+)\r\n()")
  if not n then return nil end
  local argv = {}
  for i = 1, tonumber(n) do
    local len, from = buf:match("^%$(%d+)\r\n()", at)
    if not len then return nil end
    len = tonumber(len)
    if #buf < from + len + 1 then return nil end
    argv[i] = buf:sub(from, from + len - 1)
    at = from + len + 2
  end
  return argv, buf:sub(at)
end

local server = assert(socket.bind("127.0.0.1", 0))
server:settimeout(0)
local _, port = server:getsockname()
local f = assert(io.open(DIR .. "/port.tmp", "w"))
f:write(port, "\n")
f:close()
os.rename(DIR .. "/port.tmp", DIR .. "/port")

local clients = {}   -- socket -> { buf, out (pending bytes), due, stream }

local function serve(c, st)
  while true do
    local argv, rest = parse(st.buf)
    if not argv then return end
    st.buf = rest
    local reply, stream, late = on_command(argv)
    if reply then
      st.queue[#st.queue + 1] = { due = socket.gettime() + (late or (MODE == "slow" and 0.4 or 0)),
                                  bytes = reply }
    end
    if stream then st.stream = stream end
  end
end

-- Sends what is due, keeping what the socket did not take; a stream
-- refills the queue whenever it runs dry.
local function send_some(c, st)
  if not st.queue[1] and st.stream then st.queue[1] = { due = 0, bytes = st.stream() } end
  local head = st.queue[1]
  if head and socket.gettime() >= head.due then
    local n, err, partial = c:send(head.bytes)
    local sent = n or partial or 0
    head.bytes = head.bytes:sub(sent + 1)
    if head.bytes == "" then table.remove(st.queue, 1) end
    if err == "closed" then return false end
  end
  return true
end

while true do
  local list = { server }
  for c in pairs(clients) do list[#list + 1] = c end
  local readable = socket.select(list, nil, 0.005)
  for _, s in ipairs(readable) do
    if s == server then
      local c = server:accept()
      if c then
        c:settimeout(0)
        clients[c] = { buf = "", queue = {} }
      end
    else
      local data, err, partial = s:receive(65536)
      local got = data or partial
      if got and #got > 0 then clients[s].buf = clients[s].buf .. got end
      if err == "closed" then
        clients[s] = nil
        s:close()
      end
    end
  end
  for c, st in pairs(clients) do
    serve(c, st)
    if not send_some(c, st) then
      clients[c] = nil
      c:close()
    end
  end
end
