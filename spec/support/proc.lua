-- spec/support/proc.lua: running build/luaretry (and other commands) from
-- specs, and the fault server as a real process stopped by its PID.
--
--   local proc = require "support.proc"   -- .busted puts spec/ on package.path
--   local srv = proc.server("spec/fixtures/run/always503.lua")   -- stopped by PID
--   local r = proc.run({"run", "policies/http.lua", srv.base .. "/x"})
--   r.code, r.stdout, r.stderr, r.secs
--
-- Every wait here is bounded in count and time.
local system = require "system"
local cjson = require "cjson"
local lfs = require "lfs"

local M = {}

local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec/support"
M.root = here:gsub("/spec/support$", ""):gsub("^spec/support$", ".")
M.bin = os.getenv("LUARETRY_BIN") or (M.root .. "/build/luaretry")
M.json = cjson
M.null = cjson.null
M.now = system.monotime
M.sleep = system.sleep

function M.q(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

function M.readfile(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

function M.writefile(path, data)
  local f = assert(io.open(path, "wb"))
  assert(f:write(data))
  assert(f:close())
end

-- Runs a shell command line; its exit code ("exit" status, or 128+N when
-- killed by signal N).
function M.sh(cmdline)
  local ok, how, code = os.execute(cmdline)
  if how == "signal" then return 128 + code end
  return code or (ok and 0 or -1)
end

-- A fresh temporary directory, removed by M.rmtree.  Made and removed
-- in this process: a shell and mkdir or rm for each cost 9 ms of CPU, and
-- most specs make one per test.  Its mode is the umask's (755 here, 700
-- before): what the specs write there is no secret.
function M.tmpdir()
  local path = os.tmpname()
  os.remove(path)
  assert(lfs.mkdir(path), "mkdir " .. path)
  return path
end

-- Removes what is under path, never following a link; false when
-- something stayed (a folder a spec made unreadable, say).
local function remove_tree(path)
  if lfs.symlinkattributes(path, "mode") ~= "directory" then return os.remove(path) ~= nil end
  local ok, next_name, dir = pcall(lfs.dir, path)
  if not ok then return false end
  for name in next_name, dir do
    if name ~= "." and name ~= ".." and not remove_tree(path .. "/" .. name) then return false end
  end
  return lfs.rmdir(path) ~= nil
end

function M.rmtree(path)
  if path and path:match("^/tmp/") and lfs.symlinkattributes(path, "mode") and not remove_tree(path) then
    M.sh("rm -rf " .. M.q(path))
  end
end

function M.ls(dir)
  local names = {}
  local p = io.popen("ls -A " .. M.q(dir))
  for line in p:lines() do names[#names + 1] = line end
  p:close()
  table.sort(names)
  return names
end

-- The temporary files luaretry writes beside an output ("*.luaretry-*")
-- still in dir: a finished run leaves none.
function M.leftovers(dir)
  local t = {}
  for _, name in ipairs(M.ls(dir)) do
    if name:find(".luaretry-", 1, true) then t[#t + 1] = name end
  end
  return t
end

-- Runs build/luaretry with the argument list (strings, quoted here; a
-- table {raw = "..."} goes to the shell as is).  Returns {code, stdout,
-- stderr, secs}.  opts: bin, timeout (seconds), plain, env (a list of
-- "NAME=VALUE" for the command's environment).
function M.run(args, opts)
  opts = opts or {}
  local words = {}
  for _, a in ipairs(args) do
    words[#words + 1] = type(a) == "table" and a.raw or M.q(a)
  end
  local out, err = os.tmpname(), os.tmpname()
  -- One env for all of it (each program started costs CPU).  The
  -- sanitizer runtime is preloaded when stock lua5.4 runs the sanitized
  -- module (specs run by hand; `make test` has its own host,
  -- spec/c/lua_host.c).  plain: never under it (programs not built with
  -- it).  `make test` turns leak checks off for the interpreter; our own
  -- programs get them back.  They are linked with the runtime and need no
  -- preload: without it, the shell tools before them start faster.
  local env = {}
  if opts.plain or (os.getenv("ASAN_OPTIONS") and not opts.bin) then env[1] = "-u LD_PRELOAD" end
  if not opts.plain and os.getenv("ASAN_OPTIONS") then env[#env + 1] = "ASAN_OPTIONS=detect_leaks=1" end
  for _, kv in ipairs(opts.env or {}) do env[#env + 1] = M.q(kv) end
  local cmd = M.q(opts.bin or M.bin) .. " " .. table.concat(words, " ") ..
              " </dev/null >" .. M.q(out) .. " 2>" .. M.q(err)
  if opts.timeout then cmd = "timeout -s KILL " .. opts.timeout .. " " .. cmd end
  if #env > 0 then cmd = "env " .. table.concat(env, " ") .. " " .. cmd end
  -- opts.cpu: the program's CPU time too (the shell's `times`, its
  -- children's line), which a busy machine does not stretch as it does
  -- the wall time
  local times = opts.cpu and os.tmpname()
  if times then cmd = cmd .. "; s=$?; times >" .. M.q(times) .. "; exit $s" end
  local t0 = system.monotime()
  local code = M.sh(cmd)
  local secs = system.monotime() - t0
  local r = { code = code, stdout = M.readfile(out), stderr = M.readfile(err), secs = secs }
  if times then
    local um, us, sm, ss = (M.readfile(times) or ""):match("\n(%d+)m([%d.]+)s (%d+)m([%d.]+)s")
    r.cpu = um and 60 * tonumber(um) + tonumber(us) + 60 * tonumber(sm) + tonumber(ss)
    os.remove(times)
  end
  os.remove(out)
  os.remove(err)
  return r
end

-- M.run of args with --log-json: the result, its `elapsed` the last
-- logged decision's (the engine's own clock, from the call's start: a busy
-- machine's start-up is not in it).
function M.run_timed(args, opts)
  local log = os.tmpname()
  local r = M.run(M.concat(args, { "--log-json", log }), opts)
  for _, line in ipairs(M.lines(M.readfile(log) or "")) do
    local o = M.json.decode(line)
    if o.elapsed then r.elapsed = o.elapsed end
  end
  os.remove(log)
  return r
end

-- The lists given, one after another, as one list.
function M.concat(...)
  local t = {}
  for _, list in ipairs({ ... }) do
    for _, v in ipairs(list) do t[#t + 1] = v end
  end
  return t
end

-- Short waits and a fixed seed for the runs that retry: the first backoff
-- 10 ms, its jitter within 10 ms.
M.FAST = { "--set", "backoff.initial=0.01", "--set", "backoff.jitter_max=0.01", "--seed", "1" }

-- `luaretry run http ARGS... FAST...` (the curl-like policy, short
-- waits), with opts as M.run takes them; a timeout of 60 s unless given.
function M.run_http(args, opts)
  local o = { timeout = 60 }
  for k, v in pairs(opts or {}) do o[k] = v end
  return M.run(M.concat({ "run", "http" }, args, M.FAST), o)
end

-- The lines of a string, without their newlines.
function M.lines(s)
  local t = {}
  for line in (s or ""):gmatch("([^\n]*)\n") do t[#t + 1] = line end
  return t
end

-- FNV-1a 64, as the fault server's body_hash.
function M.fnv1a(s)
  local h = 0xcbf29ce484222325
  for i = 1, #s do h = (h ~ s:byte(i)) * 0x100000001b3 end
  return string.format("%016x", h)
end

-- n bytes of every value, from a fixed generator (same bytes every run).
function M.varied_bytes(n)
  local t, x = {}, 0x2545F491
  for i = 1, n do
    x = (x * 1103515245 + 12345) & 0x7fffffff
    t[i] = string.char((x >> 16) & 0xff)
  end
  return table.concat(t)
end

---------------------------------------------------------------- processes

local function alive(pid)
  local stat = M.readfile("/proc/" .. pid .. "/stat")
  return stat ~= nil and stat:match(".*%) (%a)") ~= "Z"
end
M.alive = alive

-- Sends SIGTERM, then SIGKILL after `grace` seconds; waits (bounded) until
-- the process is gone.
function M.kill(pid, grace)
  if not pid then return end
  M.sh("kill " .. pid .. " 2>/dev/null")
  local deadline = system.monotime() + (grace or 3)
  while alive(pid) and system.monotime() < deadline do system.sleep(0.01) end
  if alive(pid) then
    M.sh("kill -KILL " .. pid .. " 2>/dev/null")
    deadline = system.monotime() + 2
    while alive(pid) and system.monotime() < deadline do system.sleep(0.01) end
  end
end

-- Waits (bounded) until pred() is true; returns its last value.
function M.wait_for(pred, seconds)
  local deadline = system.monotime() + (seconds or 5)
  local v = pred()
  while not v and system.monotime() < deadline do
    system.sleep(0.005)
    v = pred()
  end
  return v
end

---------------------------------------------------------------- the fault server

local Server = {}
Server.__index = Server

-- For a spec's own look at a server with curl: it never runs under the
-- sanitizer runtime when it is preloaded (curl hangs with libasan
-- preloaded), so never a bare `curl`.
M.CURL = "env -u LD_PRELOAD curl -sS --max-time 5 "

-- A spec's own request to a server's control path (the fault server's
-- /_faults/...): the body of its 2xx answer, within 5 s.  In this process,
-- with LuaSocket: a curl started for each cost 19 ms of CPU, before every
-- test of the files that share a server.
function M.http(method, url)
  local http, ltn12 = require "socket.http", require "ltn12"
  local chunks = {}
  local ok, code = http.request {
    url = url, method = method, sink = ltn12.sink.table(chunks),
    headers = method == "POST" and { ["content-length"] = "0" } or nil,
    create = function ()
      local c = require("socket").tcp()
      c:settimeout(5)
      return c
    end,
  }
  if not ok or type(code) ~= "number" or code < 200 or code > 299 then
    error(method .. " " .. url .. ": " .. tostring(code), 2)
  end
  return table.concat(chunks)
end

-- Starts `luaretry faults --listen 127.0.0.1:0 SCRIPT` in the background
-- (opts.host: another loopback address, e.g. "127.0.0.2").
-- The caller must stop it: srv:stop() (in a finally or after_each).
function M.server(script, opts)
  opts = opts or {}
  local host = opts.host or "127.0.0.1"
  local dir = M.tmpdir()
  local srv = setmetatable({ dir = dir, script = script }, Server)
  local pidfile, out, err = dir .. "/pid", dir .. "/out", dir .. "/err"
  M.sh("sh -c " .. M.q("exec " .. M.q(opts.bin or M.bin) .. " faults --listen " .. host .. ":0 " ..
       M.q(script) .. " >" .. M.q(out) .. " 2>" .. M.q(err) .. " </dev/null & echo $! > " ..
       M.q(pidfile)))
  srv.pid = tonumber(M.readfile(pidfile) or "")
  local line = M.wait_for(function ()
    local s = M.readfile(out)
    return s and s:match("listening on " .. host:gsub("%.", "%%.") .. ":%d+\n")
  end, 10)
  if not (srv.pid and line) then
    local why = (M.readfile(err) or "") .. (M.readfile(out) or "")
    srv:stop()
    error("fault server did not start: " .. why, 2)
  end
  srv.port = tonumber(line:match(":(%d+)"))
  srv.host = host
  srv.base = "http://" .. host .. ":" .. srv.port
  return srv
end

-- busted's setup, teardown, before_each and after_each for a fixture
-- helper called from a describe() body, `level` frames above the helper
-- (2: the helper's caller).  The hooks live in the spec file's
-- environment, not in _G: the caller's _ENV (a describe() body that calls
-- it() has one).
function M.hooks(level)
  local env, caller = _G, debug.getinfo(level + 1, "f").func
  for i = 1, 255 do
    local name, value = debug.getupvalue(caller, i)
    if not name then break end
    if name == "_ENV" then env = value break end
  end
  return env.setup, env.teardown, env.before_each, env.after_each
end

-- The fixture most command specs share, inside a describe(): a fault
-- server on SCRIPT for the whole block, reset before each test, and a
-- fresh temporary folder for each test; both cleaned up by busted's hooks.
-- `set(srv, tmp)` is called whenever either changes, so the spec keeps its
-- own locals:   local srv, tmp
--               proc.with_server(script, function (s, t) srv, tmp = s, t end)
function M.with_server(script, set, opts)
  local setup, teardown, before_each, after_each = M.hooks(2)
  local srv, tmp
  setup(function () srv = M.server(script, opts); set(srv, tmp) end)
  teardown(function () if srv then srv:stop() end end)
  before_each(function ()
    srv:reset()
    tmp = M.tmpdir()
    set(srv, tmp)
  end)
  after_each(function () M.rmtree(tmp) end)
end

function Server:stop()
  if self.stopped then return end
  self.stopped = true
  M.kill(self.pid)
  M.rmtree(self.dir)
end

-- The requests the server saw (GET /_faults/requests), decoded.
function Server:requests()
  return cjson.decode(M.http("GET", self.base .. "/_faults/requests"))
end

-- Requests seen on one path.
function Server:requests_on(path)
  local t = {}
  for _, r in ipairs(self:requests()) do
    if r.path == path then t[#t + 1] = r end
  end
  return t
end

function Server:reset()
  M.http("POST", self.base .. "/_faults/reset")
end

---------------------------------------------------------------- background runs

local Job = {}
Job.__index = Job

-- Starts build/luaretry with args in the background under a small bash
-- wrapper that records, without forking, the instant `wait` returned and
-- the exit status.  job:stop() (in a finally) kills it by PID if it is
-- still running.  A shell starts a background command with SIGINT and
-- SIGQUIT ignored, and luaretry keeps a signal ignored at start: env puts
-- the stop signals back to their default, or, with opts.ignore ("HUP,INT"),
-- ignores those, as nohup or a shell's background job does.
function M.spawn(args, dir, opts)
  local words = {}
  for _, a in ipairs(args) do words[#words + 1] = M.q(a) end
  local job = setmetatable({ dir = dir }, Job)
  local f = function (name) return M.q(dir .. "/" .. name) end
  local signals = opts and opts.ignore and ("--ignore-signal=" .. opts.ignore)
                  or "--default-signal=HUP,INT,QUIT,TERM"
  local script = "export LC_ALL=C; env -u LD_PRELOAD " .. signals .. " " .. M.q(M.bin) .. " " .. table.concat(words, " ") ..
    " </dev/null >" .. f("job.out") .. " 2>" .. f("job.err") .. " & " ..
    "echo $! > " .. f("job.pid.tmp") .. "; mv " .. f("job.pid.tmp") .. " " .. f("job.pid") .. "; " ..
    "wait $!; s=$?; t=$EPOCHREALTIME; " ..
    "echo \"$s $t\" > " .. f("job.end.tmp") .. "; mv " .. f("job.end.tmp") .. " " .. f("job.end")
  M.sh("bash -c " .. M.q(script) .. " >/dev/null 2>&1 &")
  job.pid = tonumber(M.wait_for(function () return M.readfile(dir .. "/job.pid") end, 5) or "")
  assert(job.pid, "the background run did not start")
  return job
end

-- Sends a signal; returns the instant (epoch seconds, as the wrapper's).
function Job:signal(sig)
  local tfile = self.dir .. "/job.sig"
  M.sh("bash -c " .. M.q("export LC_ALL=C; t=$EPOCHREALTIME; kill -" .. sig .. " " .. self.pid ..
       "; echo $t > " .. M.q(tfile)))
  return tonumber(M.readfile(tfile))
end

-- Waits (bounded) for the run to end: exit status and the instant it ended,
-- or nil when it did not end in time.  The bound is for a hang, never a
-- timing (a spec times the end by the instant returned): 30 s at least.
-- Beside 6 busy loops a shell took more than 5 s to start a run (final112),
-- and a signalled run had not ended within 5 s (final113, cause not shown).
function Job:wait(seconds)
  local bound = math.max(seconds or 5, 30)
  local s = M.wait_for(function () return M.readfile(self.dir .. "/job.end") end, bound)
  if not s then return nil end
  local code, t = s:match("^(%d+) ([%d.]+)")
  self.done = true
  return tonumber(code), tonumber(t)
end

-- Waits (bounded) until the run sleeps in the kernel on a FIFO or pipe (an
-- open with no partner yet, or a read): the moment a signal sent must cut,
-- whatever the machine's load (a fixed sleep raced its start).  Linux names
-- it in wchan (wait_for_partner, pipe_read, anon_pipe_read ...).  wchan is
-- "0" where it is hidden, and for some sleeps (a nanosleep, a poll): there
-- the syscall it sleeps in says it, read or open.  Any sleep once matched
-- (a batch's poll on its transfer, a futex at start): the signal came
-- before the read or the open, beside 6 busy loops (final94, final106).
local SLEEPS_ON_PIPE = { [0] = true, [1] = true, [2] = true, [257] = true } -- x86-64: read, write, open, openat
function M.sleeps_on_pipe(pid)
  local proc_dir = "/proc/" .. pid
  local w = M.readfile(proc_dir .. "/wchan") or ""
  if w:find("pipe") or w:find("partner") or w:find("fifo") then return true end
  local state = w == "0" and (M.readfile(proc_dir .. "/stat") or ""):match("^%d+ %b() (%a)")
  local nr = state == "S" and tonumber((M.readfile(proc_dir .. "/syscall") or ""):match("^(%d+) "))
  return nr ~= nil and SLEEPS_ON_PIPE[nr] == true
end

function Job:blocked_on_pipe(seconds)
  return M.wait_for(function () return M.sleeps_on_pipe(self.pid) end, seconds or 10)
end

-- Waits (bounded) until a batch waits for its --urls list at `path`: asleep
-- in the open of a FIFO with no writer yet, or, the list open, asleep in
-- the batch's poll (x86-64: poll, ppoll), where a pause of the list's
-- writer is waited for beside the transfers (its reads never wait).
local POLLS = { [7] = true, [271] = true }
function Job:waits_for_list(path, seconds)
  local function list_open()
    local p = io.popen("ls -l /proc/" .. self.pid .. "/fd 2>/dev/null")
    local out = p:read("a")
    p:close()
    return out:find(" -> " .. path .. "\n", 1, true) ~= nil
  end
  return M.wait_for(function ()
    if M.sleeps_on_pipe(self.pid) then return true end
    local dir = "/proc/" .. self.pid
    local state = (M.readfile(dir .. "/stat") or ""):match("^%d+ %b() (%a)")
    local nr = state == "S" and tonumber((M.readfile(dir .. "/syscall") or ""):match("^(%d+) "))
    return nr ~= nil and POLLS[nr] == true and list_open()
  end, seconds or 10)
end

function Job:stdout() return M.readfile(self.dir .. "/job.out") end
function Job:stderr() return M.readfile(self.dir .. "/job.err") end

function Job:stop()
  if not self.done and M.alive(self.pid) then M.kill(self.pid, 1) end
  self.done = true
end

---------------------------------------------------------------- resources

-- Whether the programs under test run under AddressSanitizer, whose
-- quarantine and shadow memory inflate resident memory: memory bounds are
-- asserted in the normal build only.
function M.asan()
  return (os.getenv("LUARETRY_BIN") or ""):find("asan", 1, true) ~= nil or
         (os.getenv("LD_PRELOAD") or ""):find("libasan", 1, true) ~= nil
end

-- The peak resident memory of a live process so far, in bytes (VmHWM),
-- or nil when it is gone.
function M.peak_rss(pid)
  local status = M.readfile("/proc/" .. pid .. "/status")
  local kb = status and status:match("VmHWM:%s*(%d+) kB")
  return kb and tonumber(kb) * 1024
end

-- Samples job's peak resident memory until it ends (bounded by `seconds`):
-- the largest seen, in bytes.  The job's own process, not its wrapper.
function M.watch_rss(job, seconds)
  local peak, deadline = 0, system.monotime() + (seconds or 30)
  while system.monotime() < deadline and not M.readfile(job.dir .. "/job.end") do
    local rss = M.peak_rss(job.pid)
    if rss and rss > peak then peak = rss end
    system.sleep(0.02)
  end
  return peak
end

-- The PIDs of processes whose command line matches the extended regex
-- `re` (pgrep -f).  Write it so that it does not match itself, as
-- "slee[p] 40": the shell running pgrep has it in its command line.
function M.pids(re)
  local t = {}
  -- (pgrep hangs under the sanitizer runtime, when it is preloaded)
  local p = io.popen("env -u LD_PRELOAD timeout -s KILL 5 pgrep -f " .. M.q(re) .. " 2>/dev/null")
  for line in p:lines() do t[#t + 1] = tonumber(line) end
  p:close()
  return t
end

-- The standard output of a short command.
function M.readfile_cmd(cmdline)
  local p = io.popen(cmdline, "r")
  local s = p:read("a")
  p:close()
  return s
end

return M
