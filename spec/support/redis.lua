-- spec/support/redis.lua: a real redis-server (Debian's) for the fleet's
-- specs and bench: on a Unix socket in a temporary folder (and, when asked,
-- a loopback port), without persistence, stopped by its PID.  Every wait is
-- bounded in count and time.
--
--   local redis = require "support.redis"
--   local r = redis.start { password = "pw", tcp = true, args = { "--replicaof", ... } }
--   r.url, r.sock, r.port, r:cli("GET", "k"), r:kill(), r:restart(), r:stop()
--   redis.cli_port(port, "PING"), redis.some_port(k)
--
-- or, for a whole describe() block, redis.with_redis (below).
local proc = require "support.proc"

local M = {}
local Redis = {}
Redis.__index = Redis

-- Neither the server nor its client runs under the sanitizer runtime, when
-- it is preloaded into the interpreter.
local ENV = "env -u LD_PRELOAD -u ASAN_OPTIONS "

local function spawn(self)
  local args = { "redis-server", "--port", tostring(self.port or 0), "--bind", "127.0.0.1",
                 "--unixsocket", self.sock, "--unixsocketperm", "700", "--save", "''",
                 "--appendonly", "no", "--dir", self.dir, "--daemonize", "no" }
  if self.password then args[#args + 1] = "--requirepass " .. proc.q(self.password) end
  for _, a in ipairs(self.args or {}) do args[#args + 1] = proc.q(a) end
  local pidfile = self.dir .. "/pid"
  os.remove(pidfile)
  proc.sh("sh -c " .. proc.q("exec " .. ENV .. table.concat(args, " ") .. " >" ..
          proc.q(self.dir .. "/log") .. " 2>&1 </dev/null & echo $! > " .. proc.q(pidfile)))
  self.pid = tonumber(proc.wait_for(function () return proc.readfile(pidfile) end, 5) or "")
  return self.pid and proc.wait_for(function () return self:cli("PING") == "PONG" end, 5)
end

-- A port nobody listens on now, most likely: redis-server refuses to start
-- on a busy one, and start() tries another (k: the try; a caller that
-- picks several at once gives each its own k).  LUARETRY_SPEC_PORTS=LO-HI
-- keeps them within a range (a machine whose ports are shared out).
local lo, hi = (os.getenv("LUARETRY_SPEC_PORTS") or ""):match("^(%d+)%-(%d+)$")
lo, hi = tonumber(lo) or 20000, tonumber(hi) or 59999
function M.some_port(k)
  local seed = tonumber(tostring(proc.now()):gsub("%D", ""):sub(-6)) or 0
  return lo + (seed * 7 + k * 7919) % (hi - lo + 1)
end
local some_port = M.some_port

function M.start(opts)
  opts = opts or {}
  local self = setmetatable({ dir = proc.tmpdir(), password = opts.password, args = opts.args },
                            Redis)
  self.sock = self.dir .. "/redis.sock"
  for k = 1, opts.tcp and 5 or 1 do
    self.port = opts.tcp and some_port(k) or nil
    if spawn(self) then
      local auth = self.password and (":" .. self.password .. "@") or ""
      self.url = "unix://" .. auth .. self.sock
      self.tcp_url = self.port and ("redis://" .. auth .. "127.0.0.1:" .. self.port .. "/0")
      return self
    end
    if self.pid then proc.kill(self.pid) end
  end
  local log = proc.readfile(self.dir .. "/log") or ""
  proc.rmtree(self.dir)
  error("redis-server did not start: " .. log, 2)
end

-- One command through redis-cli (`where`: its options that name the
-- server), bounded by `seconds`; its output without the last newline.
local function cli(where, seconds, ...)
  local words = {}
  for _, a in ipairs { ... } do words[#words + 1] = proc.q(a) end
  local out = proc.readfile_cmd(ENV .. "timeout " .. seconds .. " redis-cli " .. where ..
                                table.concat(words, " ") .. " 2>&1")
  return (out:gsub("\n$", ""))
end

function Redis:cli(...)
  local auth = self.password and ("-a " .. proc.q(self.password) .. " --no-auth-warning ") or ""
  return cli("-s " .. proc.q(self.sock) .. " " .. auth, 5, ...)
end

-- The same to 127.0.0.1:port, a server this module did not start (a
-- cluster's node, a sentinel).
function M.cli_port(port, ...)
  return cli("-h 127.0.0.1 -p " .. port .. " ", 10, ...)
end

-- Gone at once, as a crash would leave it (the socket file stays).
function Redis:kill()
  if self.pid then proc.sh("kill -KILL " .. self.pid .. " 2>/dev/null") end
  proc.wait_for(function () return not proc.alive(self.pid) end, 5)
  self.pid = nil
end

function Redis:signal(sig)
  proc.sh("kill -" .. sig .. " " .. self.pid .. " 2>/dev/null")
end

-- Back on the same socket and port, empty.
function Redis:restart()
  os.remove(self.sock)
  assert(spawn(self), "redis-server did not restart")
end

function Redis:stop()
  if self.pid then
    proc.sh("kill -CONT " .. self.pid .. " 2>/dev/null")
    proc.kill(self.pid)
  end
  self.pid = nil
  proc.rmtree(self.dir)
end

-- The fleet specs' fixture, inside a describe() (as proc.with_server): a
-- redis-server started with `opts` (as start takes them) for the whole
-- block, with opts.server = SCRIPT the fault server too (reset before each
-- test), and a fresh temporary folder for each test; all cleaned up by
-- busted's hooks.  `set(r, tmp, srv)` is called whenever one changes:
--   local r, tmp, srv
--   redis.with_redis({ tcp = true, server = SERVER },
--                    function (x, t, s) r, tmp, srv = x, t, s end)
function M.with_redis(opts, set)
  local setup, teardown, before_each, after_each = proc.hooks(2)
  local r, tmp, srv
  setup(function ()
    r = M.start(opts)
    if opts.server then srv = proc.server(opts.server) end
    set(r, tmp, srv)
  end)
  teardown(function ()
    if srv then srv:stop() end
    if r then r:stop() end
  end)
  before_each(function ()
    if srv then srv:reset() end
    tmp = proc.tmpdir()
    set(r, tmp, srv)
  end)
  after_each(function () proc.rmtree(tmp) end)
end

return M
