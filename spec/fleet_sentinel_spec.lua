-- The fleet behind Redis Sentinel (README "Fleet", luaretry(1) --redis):
-- redis-sentinel://HOST:PORT,...#MASTER names sentinels, which are asked
-- for the master, and asked again after a failover.  On loopback: one
-- master, one replica (--replicaof), three redis-sentinel processes
-- (quorum 2), each with its own config file in a temporary folder (they
-- rewrite it); the master is SIGKILLed while processes run one after
-- another.  (A sentinel that answers garbage, or names a replica or a port
-- where nothing listens: spec/fleet_hostile_spec.lua.)  Every process is
-- stopped by its PID; every wait is bounded.
local proc = require "support.proc"
local redis = require "support.redis"
local q = proc.q

local SERVER = proc.root .. "/spec/fixtures/fleet/server.lua"
local LOST = "local guards decide until Redis is back"
local BACK = "back, fleet%-wide again"
local ENV = "env -u LD_PRELOAD -u ASAN_OPTIONS "
local NAME = "lrmaster"

-- A big budget the runs here never exhaust: each failure spends one token,
-- so what Redis holds counts the failures exactly.
local POLICY_TEXT = table.concat({
  'name = "sentinel-fleet"', "max_attempts = 3", "deadline = 3", "attempt_timeout = 1",
  "backoff = { initial = 0.05, max = 0.05 }",
  "budget = { max_tokens = 1000, token_ratio = 0.1 }", "fleet = { sync = 50 }" }, "\n")

local cli_port = redis.cli_port
local count, lease_shown = require("support.fleet").count, require("support.fleet").lease_shown

-- A redis-sentinel watching the master at mport, in dir (its config, log
-- and PID there); tries another port when its first is taken.
local function sentinel(dir, mport, i)
  for k = 1, 5 do
    local port = redis.some_port(i * 10 + k)
    local conf = dir .. "/sentinel-" .. i .. ".conf"
    proc.writefile(conf, table.concat({
      "port " .. port, "bind 127.0.0.1", "daemonize no", "dir " .. dir,
      "sentinel resolve-hostnames no",
      ("sentinel monitor %s 127.0.0.1 %d 2"):format(NAME, mport),
      "sentinel down-after-milliseconds " .. NAME .. " 1000",
      "sentinel failover-timeout " .. NAME .. " 3000", "" }, "\n"))
    local pidfile = dir .. "/sentinel-" .. i .. ".pid"
    proc.sh("sh -c " .. q("exec " .. ENV .. "redis-sentinel " .. q(conf) .. " >" ..
            q(dir .. "/sentinel-" .. i .. ".log") .. " 2>&1 </dev/null & echo $! > " .. q(pidfile)))
    local pid = tonumber(proc.wait_for(function () return proc.readfile(pidfile) end, 5) or "")
    if pid and proc.wait_for(function () return cli_port(port, "PING") == "PONG" end, 5) then
      return { pid = pid, port = port }
    end
    if pid then proc.kill(pid) end
  end
  error("redis-sentinel did not start: " .. (proc.readfile(dir .. "/sentinel-" .. i .. ".log") or ""))
end

-- What a sentinel says of the master: a table of its fields.
local function master_info(s)
  local out, t = proc.lines(cli_port(s.port, "SENTINEL", "master", NAME)), {}
  for i = 1, #out - 1, 2 do t[out[i]] = out[i + 1] end
  return t
end

describe("the fleet behind Redis Sentinel", function ()
  local srv, master, replica, sentinels, dir, url, policy
  local new_key = require("support.fleet").keys("sentinel")

  local SLOW
  setup(function ()
    srv = proc.server(SERVER)
    dir = proc.tmpdir()
    SLOW = dir .. "/slow.lua"
    proc.writefile(SLOW, 'respond = routes{ ["/slow503"] = {status = 503, delay = 0.1, body = "busy\\n"} }\n')
    policy = dir .. "/policy.lua"
    proc.writefile(policy, POLICY_TEXT)
    -- (replicas sync at once, not after the 5 s Redis waits for more)
    master = redis.start { tcp = true, args = { "--repl-diskless-sync-delay", "0" } }
    replica = redis.start { tcp = true, args = { "--replicaof", "127.0.0.1", tostring(master.port) } }
    sentinels = {}
    local hosts = {}
    for i = 1, 3 do
      sentinels[i] = sentinel(dir, master.port, i)
      hosts[i] = "127.0.0.1:" .. sentinels[i].port
    end
    url = "redis-sentinel://" .. table.concat(hosts, ",") .. "/0#" .. NAME
    -- a failover needs the sentinels to know the replica and each other
    -- (they learn it from the master within a few seconds)
    local ready = proc.wait_for(function ()
      if not replica:cli("INFO", "replication"):find("master_link_status:up", 1, true) then
        return false
      end
      for _, s in ipairs(sentinels) do
        local m = master_info(s)
        if m["num-slaves"] ~= "1" or m["num-other-sentinels"] ~= "2" then return false end
      end
      return true
    end, 20)
    assert(ready, "the sentinels did not find the replica and each other")
  end)

  teardown(function ()
    for _, s in ipairs(sentinels or {}) do proc.kill(s.pid) end
    if srv then srv:stop() end
    if master then master:stop() end
    if replica then replica:stop() end
    if dir then proc.rmtree(dir) end
  end)

  -- (the connect timeout bounds the sentinels' answers too, all three
  -- asked within it: the default 250 ms ran out for `luaretry fleet` in
  -- final67, "no master lrmaster from 1 of 3 sentinels")
  local PATIENT = require("support.fleet").PATIENT
  local function run(key, extra)
    local args = proc.concat({ "run", policy, srv.base .. "/503", "--redis", url, "--set", "fleet.key=" .. key,
                               "--seed", "1" }, PATIENT, extra or {})
    return proc.run(args, { timeout = 30 })
  end

  local function fleet(key)
    return proc.run(proc.concat({ "fleet", policy, "--redis", url, "--set", "fleet.key=" .. key }, PATIENT),
                    { timeout = 30 })
  end

  it("asks the sentinels for the master; the guards are shared through it", function ()
    local key = new_key()
    for _ = 1, 2 do
      local x = run(key)
      assert.are.equal(4, x.code, x.stderr)
      assert.is_nil(x.stderr:find(LOST, 1, true), x.stderr)
    end
    local st = fleet(key)
    assert.are.equal(0, st.code, st.stderr)
    -- two processes, three failures each, one token each
    -- each process's first two failures reach Redis before its retries
    -- (the round trip before each); its last goes with the flush at exit,
    -- which a handle whose last round trip Redis answered late skips (on
    -- a busy machine, under ASan: 995 once): 994, and at most one short
    -- of it per process
    local tokens = tonumber(st.stdout:match("budget: ([%d.]+) of 1000 tokens"))
    assert.is_true(tokens and tokens >= 994 and tokens <= 996, st.stdout)
    assert.matches("processes that synced in the last minute: 2\n", st.stdout)
    assert.matches("at redis%-sentinel://127%.0%.0%.1:%d+,127%.0%.0%.1:%d+,127%.0%.0%.1:%d+/0#" ..
                   NAME, st.stdout)
    -- the master holds it, as the sentinels named it
    assert.are.equal("1", master:cli("EXISTS", "luaretry:{" .. key .. "}"))
  end)

  -- A process failing steadily holds a block of the budget's tokens
  -- (core/fleet/budget_lease.c): `luaretry fleet` reads it through the
  -- sentinels.  (Its round trips, the sentinel's question among them:
  -- spec/fleet_lease_spec.lua, against a fake sentinel that logs each.)
  it("shows the budget's leases out, read through the sentinels", function ()
    local key = new_key()
    local shown = lease_shown(policy, url, key, function () return fleet(key).stdout end)
    assert.matches("\n  leases: %d+%.000 of them out in blocks to 1 process\n", shown)
  end)

  it("goes on under the local guards through a failover, and finds the new master", function ()
    local key = new_key()
    assert.are.equal(4, run(key).code)
    assert.are.equal("1", master:cli("EXISTS", "luaretry:{" .. key .. "}"))
    -- and one process that lives through it all: a batch whose transfers
    -- go one at a time, each answered 503 after 0.1 s (reconnecting at
    -- least every second: the default backoff grows to 30 s)
    local tmp = proc.tmpdir()
    local slow = proc.server(SLOW)
    local urls = {}
    for i = 1, 600 do urls[i] = slow.base .. "/slow503" end
    proc.writefile(tmp .. "/urls", table.concat(urls, "\n") .. "\n")
    -- a command timeout for a busy machine's Redis (the default 100 ms ran
    -- out once under ASan after the failover, and said a second outage)
    local job = proc.spawn({ "run", policy, "--urls", tmp .. "/urls", "--parallel-max", "1", "--redis",
                             url, "--set", "fleet.key=" .. new_key(), "--set", "fleet.reconnect=1000",
                             "--set", "fleet.command_timeout=1000", "--seed", "1" }, tmp)
    local done, why = pcall(function ()
      assert.truthy(proc.wait_for(function () return (job:stderr() or ""):find("%[3%]") end, 10),
                    job:stderr())
    end)
    if not done then
      job:stop()
      slow:stop()
      proc.rmtree(tmp)
      error(why)
    end
    master:kill()
    -- one process after another (each its own handle: it says the outage
    -- once) until one finds the fleet again: the sentinels promote the
    -- replica (the master down after 1 s, then a vote), and the next
    -- connect asks them again
    local outages, runs, clean, t0 = 0, 0, nil, proc.now()
    while not clean and proc.now() - t0 < 45 do
      local x = run(key)
      runs = runs + 1
      assert.are.equal(4, x.code, x.stderr)
      -- a call ends by its deadline (3 s), whatever Redis does: its own time,
      -- as it says it, within 3 s of slack (a loaded machine's, under ASan);
      -- the process's, with its start, first sync and last flush (each
      -- bounded by the fleet's timeouts), within 15 s of slack
      local own = tonumber(x.stderr:match("gave up after %d+ attempts over ([%d.]+) s"))
      assert.truthy(own, x.stderr)
      assert.is_true(own < 3 + 3, ("the call: %.3f s: %s"):format(own, x.stderr))
      assert.is_true(x.secs < 3 + 15, ("the process: %.2f s: %s"):format(x.secs, x.stderr))
      local said = count(x.stderr, LOST:gsub("%p", "%%%0"))
      assert.is_true(said <= 1, x.stderr)
      outages = outages + said
      if said == 0 then clean = x end
    end
    -- the batch: the outage said once, then back on the new master
    local back = proc.wait_for(function () return (job:stderr() or ""):find(BACK) end, 30)
    job:signal("TERM")
    job:wait(10)
    job:stop()
    slow:stop()
    local stderr = job:stderr() or ""
    proc.rmtree(tmp)
    assert.truthy(back, stderr:gsub("luaretry: %[[^\n]*\n", ""))
    assert.are.equal(1, count(stderr, LOST:gsub("%p", "%%%0")), stderr)
    local calls, worst = 0, 0
    for t in stderr:gmatch("status %d+, ([%d.]+) s, exit") do
      calls, worst = calls + 1, math.max(worst, tonumber(t))
    end
    assert.is_true(calls >= 3, stderr)
    assert.is_true(worst < 3 + 3, "the slowest call: " .. worst .. " s") -- its own time, as above
    assert.truthy(clean, "no process found the new master in 45 s")
    -- The batch above is the process that must see the outage (said once,
    -- then back).  A process started after the kill may already find the
    -- new master: on a busy machine the first one's start took longer than
    -- the sentinels' failover (final53, under ASan, two spec files at a
    -- time), so each is held to its time and to saying it at most once.
    print(("\n  after the kill: %d processes, %d saw the outage, in %.1f s"):format(runs, outages,
                                                                               proc.now() - t0))
    assert.are.equal("127.0.0.1\n" .. replica.port,
                     cli_port(sentinels[1].port, "SENTINEL", "get-master-addr-by-name", NAME))
    -- the new master holds the fleet's state, shared across processes: the
    -- replicated one, and two more processes' failures (three each)
    local key2 = new_key()
    for _ = 1, 2 do assert.are.equal(4, run(key2).code) end
    local st = fleet(key2)
    assert.are.equal(0, st.code, st.stderr)
    -- 994, or one short of it per process whose flush at exit was skipped
    -- (as in the first case: 995 once, in final30)
    local tokens = tonumber(st.stdout:match("budget: ([%d.]+) of 1000 tokens"))
    assert.is_true(tokens and tokens >= 994 and tokens <= 996, st.stdout)
    assert.are.equal("1", replica:cli("EXISTS", "luaretry:{" .. key2 .. "}"))
    assert.are.equal("1", replica:cli("EXISTS", "luaretry:{" .. key .. "}"))
  end)
end)
