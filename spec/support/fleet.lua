-- spec/support/fleet.lua: what the fleet's specs (spec/fleet*_spec.lua)
-- share: a fleet key of each test's own, n real `luaretry` processes at
-- once, the fake Redis (spec/fixtures/fleet/fake_redis.lua) that answers
-- garbage, late or never, and the request times a fault server saw.
-- Every wait is bounded in count and time.
--
--   local fleet = require "support.fleet"
--   local new_key = fleet.keys("spec")   -- new_key() -> "spec-123456-1", "spec-123457-2"...
--   local res = fleet.many(10, function (i) return { "run", POLICY, url } end)
--   res[i].code, .stdout, .stderr, .secs, .started, .ended
--   local f = fleet.fake("silent")       -- f.url(), f.log(), f.stop()
--   fleet.most_in(fleet.times(srv, "/200"), 2)
local proc = require "support.proc"
local q = proc.q

local M = {}

local FAKE = proc.root .. "/spec/fixtures/fleet/fake_redis.lua"
-- many() kills what is still running after this many seconds.
local LIMIT = 60

-- A function that returns a fresh key at each call: prefix, the clock's
-- milliseconds, a count.
function M.keys(prefix)
  local n = 0
  return function ()
    n = n + 1
    return ("%s-%d-%d"):format(prefix, math.floor(proc.now() * 1000) % 1000000, n)
  end
end

-- Now, in seconds since the epoch: the clock many()'s instants are on.
M.epoch = require("system").gettime

-- support.text's, here too: every fleet spec counts lines said once.
M.count = require("support.text").count

-- n `luaretry` processes at once, each with args_of(i) and opts.env (a list
-- of "NAME=VALUE"), all killed at LIMIT s.  Waits (until then) for all and
-- returns, for each, {code, stdout, stderr, secs, started, ended}: code nil
-- for one that did not end; started and ended in seconds since the epoch,
-- as M.epoch() tells them.  opts.background: returns at once a function that waits and
-- returns the same.
function M.many(n, args_of, opts)
  opts = opts or {}
  local dir = proc.tmpdir()
  local env = {}
  for _, kv in ipairs(opts.env or {}) do env[#env + 1] = q(kv) end
  -- `make test` turns leak checks off for the interpreter it preloads the
  -- sanitizer into; our own programs get them back (as proc.run)
  if os.getenv("ASAN_OPTIONS") then env[#env + 1] = "ASAN_OPTIONS=detect_leaks=1" end
  local prefix = #env > 0 and ("env " .. table.concat(env, " ") .. " ") or ""
  local lines = { "export LC_ALL=C" } -- $EPOCHREALTIME with a decimal point
  for i = 1, n do
    local words = {}
    for _, a in ipairs(args_of(i)) do words[#words + 1] = q(a) end
    local f = q(dir .. "/" .. i)
    lines[#lines + 1] = ("( s=$EPOCHREALTIME; %s%s %s </dev/null >%s.out 2>%s.err; " ..
                         "echo \"$? $s $EPOCHREALTIME\" >%s.tmp; mv %s.tmp %s.end ) &")
      :format(prefix, q(proc.bin), table.concat(words, " "), f, f, f, f, f)
  end
  lines[#lines + 1] = "wait"
  proc.writefile(dir .. "/run.sh", table.concat(lines, "\n") .. "\n")
  local deadline = proc.now() + LIMIT + 5
  proc.sh("timeout -s KILL " .. LIMIT .. " bash " .. q(dir .. "/run.sh") .. " >/dev/null 2>&1 &")
  local function collect()
    local out = {}
    for i = 1, n do
      local f = dir .. "/" .. i
      local e = proc.wait_for(function () return proc.readfile(f .. ".end") end,
                              math.max(0, deadline - proc.now()))
      local code, t0, t1 = (e or ""):match("^(%d+) ([%d.]+) ([%d.]+)")
      out[i] = { code = tonumber(code), secs = t1 and (tonumber(t1) - tonumber(t0)),
                 started = tonumber(t0), ended = tonumber(t1),
                 stdout = proc.readfile(f .. ".out") or "", stderr = proc.readfile(f .. ".err") or "" }
    end
    proc.rmtree(dir)
    return out
  end
  if opts.background then return collect end
  return collect()
end

-- The fake Redis in mode `mode` (see its file), on 127.0.0.1, in the
-- background; f.stop() kills it by PID.  f.url(auth) is its redis:// URL
-- (auth: "user:pass@"), f.log() what it was sent.
function M.fake(mode)
  local dir = proc.tmpdir()
  proc.sh("sh -c " .. q("exec env -u LD_PRELOAD -u ASAN_OPTIONS lua5.4 " .. q(FAKE) .. " " ..
          q(mode) .. " " .. q(dir) .. " >" .. q(dir .. "/out") .. " 2>&1 </dev/null & echo $! > " ..
          q(dir .. "/pid")))
  local pid = tonumber(proc.wait_for(function () return proc.readfile(dir .. "/pid") end, 5) or "")
  local port = tonumber(proc.wait_for(function () return proc.readfile(dir .. "/port") end, 5) or "")
  local f = { dir = dir, pid = pid, port = port }
  function f.url(auth) return "redis://" .. (auth or "") .. "127.0.0.1:" .. tostring(port) .. "/0" end
  function f.log() return proc.readfile(dir .. "/log") or "" end
  function f.stop()
    proc.kill(pid, 1)
    proc.rmtree(dir)
  end
  if not (pid and port) then
    local why = proc.readfile(dir .. "/out") or ""
    f.stop()
    error("the fake Redis did not start: " .. why, 2)
  end
  return f
end

-- The fleet's timeouts for a CLI run against a real Redis whose
-- assertions would break if one round trip timed out (an outage said, a
-- block never granted): the defaults (100 ms a command, 250 ms to connect,
-- the sentinels' answers within it) are a deployed Redis's, and ran out
-- under ASan beside another spec file (final45, final57, final65, final67).
M.PATIENT = { "--set", "fleet.command_timeout=5000", "--set", "fleet.connect_timeout=5000" }

-- `luaretry run POLICY --redis URL -- false` (fleet key `key`: a call
-- failing for ever) in the background until what show() returns (the
-- output of a `luaretry fleet`) says one process holds a block of the
-- budget's tokens, 15 s at most; then killed.  show()'s last output.
-- A process gives its block back two sync periods after its last
-- failure, and a busy machine spaces the failures out: under ASan in a
-- `make test` beside `perf record -a`, 9 failures came and no `luaretry
-- fleet` of the 15 s saw a block.  So the call syncs every second (its
-- block stays while it fails at least every 2 s), with M.PATIENT's
-- timeouts (the block is granted by a sync Redis answers).
function M.lease_shown(policy, url, key, show)
  local dir = proc.tmpdir()
  local job = proc.spawn(proc.concat({ "run", policy, "--redis", url, "--set", "fleet.key=" .. key,
                                       "--set", "fleet.sync=1000" }, M.PATIENT,
                                     { "--set", "max_attempts=100000", "--set", "deadline=60", "-q", "--",
                                       "false" }), dir)
  local shown
  proc.wait_for(function ()
    shown = show() or ""
    return shown:find("to 1 process\n", 1, true)
  end, 15)
  job:signal("KILL")
  job:wait(5)
  job:stop()
  proc.rmtree(dir)
  return shown
end

-- The times of the requests the fault server saw on `path`, sorted.
function M.times(srv, path)
  local t = {}
  for _, r in ipairs(srv:requests_on(path)) do t[#t + 1] = r.time end
  table.sort(t)
  return t
end

-- The most of the sorted times t within any `window` seconds.
function M.most_in(t, window)
  local most, j = 0, 1
  for i = 1, #t do
    while t[i] - t[j] > window do j = j + 1 end
    if i - j + 1 > most then most = i - j + 1 end
  end
  return most
end

return M
