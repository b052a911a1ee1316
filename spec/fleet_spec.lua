-- The fleet (README "Fleet"): a policy's budget and breaker shared through
-- a real redis-server (started here on a Unix socket and a loopback port,
-- stopped by its PID) by real `luaretry run` processes against the real
-- fault server, and by this process through the Lua module.  Each test
-- has a fleet key of its own; times are short through --set.
local proc = require "support.proc"
local redis = require "support.redis"
local fleet = require "support.fleet"
local lr = require "luaretry"
local q = proc.q

local BUDGET = proc.root .. "/spec/fixtures/fleet/budget.lua"
local BREAKER = proc.root .. "/spec/fixtures/fleet/breaker.lua"
local LONG = proc.root .. "/spec/fixtures/fleet/long.lua"
local SERVER = proc.root .. "/spec/fixtures/fleet/server.lua"

local LOST = "local guards decide until Redis is back"
local BACK = "back, fleet%-wide again"

local new_key, count, many = fleet.keys("spec"), fleet.count, fleet.many

describe("the fleet", function ()
  local r, tmp, srv
  redis.with_redis({ tcp = true, server = SERVER }, function (x, t, s) r, tmp, srv = x, t, s end)

  -- A healthy Redis on a busy machine may take more than the default 100 ms
  -- to answer; only the specs of a Redis that goes away keep the default.
  -- The scripts get 5 s a call: 100 sanitized processes started at once
  -- beside a loaded machine's other work wait their turn for a core, and
  -- one was stopped loading its policy by the 0.25 s limit (final94, make
  -- test beside 6 busy loops), a limit these cases do not test.
  local function run_args(policy, path, key, extra, command_timeout)
    local a = { "run", policy, srv.base .. path, "--redis", r.url, "--set", "fleet.key=" .. key,
                "--set", "fleet.command_timeout=" .. (command_timeout or 1000), "--set", "time_limit=5" }
    for _, x in ipairs(extra or {}) do a[#a + 1] = x end
    return a
  end

  it("shares one budget: 30 processes, 4 attempts each, against a 503 make at most 4 retries in all, as simulate --fleet predicts", function ()
    local key = new_key()
    srv:reset()
    -- 5 s a round trip, as below: a process whose last round trip to
    -- Redis timed out ends without one more (by design: no call waits on
    -- a slow Redis), and its block stays out until it expires; under load
    -- (six spec files at a time, in a trial) 1 s was once too little
    local res = many(30, function ()
      return run_args(BUDGET, "/503", key, { "--stats", "--set", "fleet.connect_timeout=5000" }, 5000)
    end)
    local sent = #srv:requests_on("/503")
    local refused = 0
    for i, x in ipairs(res) do
      assert.truthy(x.code == 6 or x.code == 4, "process " .. i .. ": " .. tostring(x.code) .. x.stderr)
      assert.matches("guards fleet", x.stderr)
      if x.code == 6 then
        refused = refused + 1
        assert.matches("the fleet's retry budget", x.stderr)
      end
    end
    -- luaretry(1)'s bound: the 5 tokens above half, plus what blocks hold
    -- (taken from those 5, spent by their holders while another spends
    -- against the fleet's count): 10 retries at most.  The model, below,
    -- holds the run within 3 requests of its 34 (35 seen under ASan).
    assert.is_true(sent >= 30 and sent <= 30 + 5 + 5, "requests: " .. sent)
    assert.is_true(refused >= 26, "refused: " .. refused)
    -- the model, with the policy's sync period, within 0.1 of the real run
    local sim = proc.run({ "simulate", BUDGET, "--clients", "30", "--fleet", "--json" })
    assert.are.equal(0, sim.code, sim.stderr)
    local m = proc.json.decode(sim.stdout)
    assert.is_true(math.abs(m.fleet.amplification - sent / 30) <= 0.1,
                   ("model %.3f, real %.3f"):format(m.fleet.amplification, sent / 30))
    assert.are.equal(4, m.own.amplification)
    -- what Redis holds: the budget spent, every process listed
    local st = proc.run({ "fleet", BUDGET, "--redis", r.url, "--set", "fleet.command_timeout=5000",
                          "--set", "fleet.key=" .. key })
    assert.are.equal(0, st.code, st.stderr)
    assert.matches("budget: 0%.000 of 10 tokens", st.stdout)
    assert.matches("processes that synced in the last minute: 30\n", st.stdout)
  end)

  it("the budget's floor is the fleet's: 100 processes of one call each stay within 1.1 of their first attempts", function ()
    local key = new_key()
    srv:reset()
    local t0 = proc.now()
    -- Redis given 5 s a round trip: on a busy machine 100 processes and
    -- Redis share two cores, and a round trip cut short leaves the call
    -- to its own local guards (by design: no call waits on Redis)
    local res = many(100, function ()
      return run_args(BUDGET, "/503", key, { "--set", "budget.reserve=0.1", "-q",
                                             "--set", "fleet.connect_timeout=5000" }, 5000)
    end)
    local secs = proc.now() - t0
    local sent = #srv:requests_on("/503")
    for i, x in ipairs(res) do
      assert.truthy(x.code == 6 or x.code == 4, "process " .. i .. ": " .. tostring(x.code) .. x.stderr)
    end
    -- 100 first attempts, the tokens' few retries, and one reserve for the
    -- fleet: 5 held, 0.1 a second while the processes ran
    assert.is_true(sent >= 100, "requests: " .. sent)
    assert.is_true(sent <= 110 + math.ceil(0.1 * secs), ("requests: %d in %.1f s"):format(sent, secs))
    -- each process's own floor instead (no Redis): every lone call makes all 4
    srv:reset()
    res = many(10, function ()
      return { "run", BUDGET, srv.base .. "/503", "-q", "--set", "budget.reserve=0.1" }
    end)
    for i, x in ipairs(res) do assert.are.equal(4, x.code, "process " .. i .. ": " .. x.stderr) end
    assert.are.equal(40, #srv:requests_on("/503"))
  end)

  it("refuses a retry decided on stale counts once the fleet's budget is spent while it waits", function ()
    local key = new_key()
    local p = assert(lr.load(BUDGET, { ["fleet.redis"] = r.url, ["fleet.command_timeout"] = 1000,
                                      set = { ["fleet.key"] = key } }))
    assert(p:fleet_sync())
    local c = assert(p:begin {})
    local d = c:report { status = 503 }
    assert.is_true(d.retry, d.message)     -- 9 tokens, as far as this process knows
    -- meanwhile the rest of the fleet spends the budget
    local other = proc.run(run_args(BUDGET, "/503", key, { "-q" }))
    assert.are.equal(4, other.code, other.stderr)
    -- another call of this process fails: its failure's round trip (the
    -- worker's: no step waits for it) brings the fleet's counts back
    local c2 = assert(p:begin {})
    c2:report { status = 503 }
    local learned = proc.wait_for(function () return p:metrics().budget_tokens < 5 end, 3)
    c2:close()
    assert.truthy(learned, "the fleet's spent budget was never learned")
    d = c:next()                            -- the pre-retry check asks the fleet's counts again
    assert.are.equal("budget", d.verdict)
    assert.matches("spent while the call waited", d.message)
    c:close()
    p:close()
  end)

  it("a breaker opened by one process refuses calls in another within one sync period", function ()
    local key = new_key()
    local logs = {}
    local p = assert(lr.load(BREAKER, { ["fleet.redis"] = r.url, ["fleet.command_timeout"] = 1000,
                                        set = { ["fleet.key"] = key },
                                        log = function (line) logs[#logs + 1] = line end }))
    assert(p:fleet_sync())
    local function call()
      local c = assert(p:begin {})
      local d = c:next()
      if d.retry then d = c:report { status = 200 } end
      c:close()
      return d.verdict
    end
    assert.are.equal("success", call())
    assert.are.equal("fleet", p:metrics().guards)
    -- another process fails three times in a row: the fleet's breaker opens
    local a = proc.run(run_args(BREAKER, "/503", key, { "-q" }))
    assert.are.equal(4, a.code, a.stderr)
    local t0, refused_after = proc.now(), nil
    local trips0, trips = p:metrics().fleet_round_trips, nil
    for _ = 1, 400 do                       -- bounded: 2 s
      if call() == "circuit_open" then
        refused_after, trips = proc.now() - t0, p:metrics().fleet_round_trips - trips0
        break
      end
      proc.sleep(0.005)
    end
    assert.truthy(refused_after, "never refused")
    -- within one sync period, counted in this process's round trips (one a
    -- period, fleet.sync = 100 ms): one in flight as the other process
    -- ended may bring the breaker's state before it opened, the next brings
    -- it open, and one more may end before this loop's next step; a busy
    -- machine delays the worker's turns, never adds to their count
    assert.is_true(trips <= 3, ("refused after %d round trips (%.3f s)"):format(trips, refused_after))
    assert.is_true(refused_after < 1, ("refused after %.3f s"):format(refused_after))
    assert.are.equal("open", p:metrics().breaker)
    assert.same({}, logs)                   -- Redis was fine: nothing to say
    p:close()
  end)

  it("limits half-open probes fleet-wide: 8 processes after the open period, 1 request", function ()
    local key = new_key()
    local a = proc.run(run_args(BREAKER, "/503", key, { "-q" }))
    assert.are.equal(4, a.code, a.stderr)
    proc.sleep(1.1)                         -- open_seconds = 1
    srv:reset()
    local res = many(8, function () return run_args(BREAKER, "/503", key) end)
    assert.are.equal(1, #srv:requests_on("/503"))
    -- the probe fails and is not retried (the fleet's breaker opened again,
    -- or is half-open with its one permit out: a retry needs a permit too,
    -- and the message says which); the other seven never made an attempt
    -- (the fleet's breaker half-open with the permit out, or open again)
    local function says(x, open)
      return x.stderr:find(open, 1, true) or
             x.stderr:find("fleet's circuit is half-open with no probe left: its 1 probe permit is out", 1, true)
    end
    local probes, refused = 0, 0
    for i, x in ipairs(res) do
      assert.are.equal(6, x.code, "process " .. i .. ": " .. tostring(x.stderr))
      if x.stderr:find("attempt 1/3: 503", 1, true) then
        probes = probes + 1
        assert.is_truthy(says(x, "fleet's circuit opened"), x.stderr)
      else
        refused = refused + 1
        assert.is_truthy(says(x, "fleet's circuit is open"), x.stderr)
      end
    end
    assert.are.equal(1, probes)
    assert.are.equal(7, refused)
  end)

  -- Redis goes away (`how`: "kill" or "stop") under 10 processes, once all
  -- of them are connected to it: each is mid-call then, however long a busy
  -- machine took to start them, and its deadline (5 s) is seconds away.
  -- Retries 0.3 s apart: 10 processes make at most 170 failures in their
  -- 5 s, which leaves the fleet's budget (1000 tokens) above half however
  -- late Redis goes (long.lua's 0.05 to 0.1 s spent it, exit 6, when a
  -- busy machine took seconds to connect all ten).
  local function lost_redis(how)
    local key = new_key()
    srv:reset()
    local extra = { "--set", "deadline=5", "--set", "backoff.initial=0.3", "--set", "backoff.max=0.3",
                    "--set", "backoff.jitter=none" }
    local wait = many(10, function () return run_args(LONG, "/503", key, extra, 100) end,
                      { background = true })
    -- one connection each, and redis-cli's own
    local function clients() return tonumber(r:cli("INFO", "clients"):match("connected_clients:(%d+)")) or 0 end
    local all = proc.wait_for(function () return clients() >= 11 end, 30)
    local gone = fleet.epoch()
    if how == "kill" then r:kill() else r:signal("STOP") end
    local res = wait()
    if how == "kill" then r:restart() else r:signal("CONT") end
    assert.truthy(all, "the 10 processes were not all connected to Redis within 30 s")
    for i, x in ipairs(res) do
      -- deadline (5) on the local guards, with one line saying so
      assert.are.equal(5, x.code, "process " .. i .. ": " .. tostring(x.stderr))
      assert.is_true(x.ended > gone, ("process %d ended %.3f s before Redis went away"):format(i, gone - x.ended))
      -- at its deadline: one that waited for Redis would wait until the
      -- end of this spec's 60 s (a stopped Redis goes on after the last
      -- process ended); the margin is a busy machine's start-up
      assert.is_true(x.secs < 5 + 10, ("process %d took %.3f s"):format(i, x.secs))
      -- each loss said once, and each return: a live Redis that a busy
      -- machine kept from answering within 100 ms is lost and back before
      -- it went away (seen at load 11); the last line says it is lost
      local lost, back = count(x.stderr, LOST), count(x.stderr, BACK)
      assert.is_true(lost >= 1 and lost == back + 1, x.stderr)
      assert.are.equal(lost + back, count(x.stderr, "fleet guards"), x.stderr)
      local last
      for line in x.stderr:gmatch("[^\n]*fleet guards[^\n]*") do last = line end
      assert.matches(LOST, last)
      -- a stopped Redis takes the connection and never answers: the round
      -- trip ends at the command timeout
      if how == "stop" then assert.matches("no reply in time", last) end
    end
  end

  it("Redis killed mid-run: every process ends at its deadline on its local guards, saying so once", function ()
    lost_redis("kill")
  end)

  it("Redis stopped (SIGSTOP) mid-run: the same, each round trip bounded by the command timeout", function ()
    lost_redis("stop")
  end)

  it("Redis back: a process rejoins the fleet after its reconnect backoff, and says so once", function ()
    local key = new_key()
    local logs = {}
    local p = assert(lr.load(LONG, { ["fleet.redis"] = r.url, ["fleet.reconnect"] = 200,
                                     ["fleet.command_timeout"] = 1000,
                                     set = { ["fleet.key"] = key },
                                     log = function (line) logs[#logs + 1] = line end }))
    local function fail_once()
      local c = assert(p:begin {})
      c:report { status = 503 }
      c:next()                              -- the pre-retry check: a round trip
      c:close()
    end
    assert(p:fleet_sync())
    fail_once()
    assert.are.equal("fleet", p:metrics().guards)
    r:kill()
    -- the worker finds Redis gone (no step waits for it)
    local lost = proc.wait_for(function ()
      fail_once()
      return p:metrics().guards == "fallback"
    end, 3)
    assert.truthy(lost, "never fell back")
    assert.are.equal(1, #logs)
    assert.matches(LOST, logs[1])
    r:restart()
    local rejoined = proc.wait_for(function ()
      fail_once()
      return p:metrics().guards == "fleet"
    end, 3)
    assert.truthy(rejoined, "did not rejoin")
    assert.are.equal(2, #logs)
    assert.matches(BACK, logs[2])
    assert.are.equal("1", r:cli("EXISTS", "luaretry:{" .. key .. "}"))
    p:close()
  end)

  it("no step waits for Redis: a stopped Redis (SIGSTOP) is noticed by the worker and said once", function ()
    local logs = {}
    local p = assert(lr.load(LONG, { ["fleet.redis"] = r.url, ["fleet.command_timeout"] = 5000,
                                     set = { ["fleet.key"] = new_key() },
                                     log = function (line) logs[#logs + 1] = line end }))
    assert.are.equal("fallback", p:metrics().guards)  -- not synced yet: its own guards
    assert(p:fleet_sync())
    assert.are.equal("fleet", p:metrics().guards)
    finally(function () r:signal("CONT") end)
    r:signal("STOP")
    -- successes and failures for 0.8 s, while the worker's round trip (kicked
    -- by the first failure) waits out its 5 s timeout: none waits for it
    local slowest, t0, steps = 0, proc.now(), 0
    local function step()
      local t = proc.now()
      local c = assert(p:begin {})
      local d = c:report { status = steps % 2 == 0 and 200 or 503 }
      if d.retry then d = c:next() end
      c:close()
      slowest = math.max(slowest, proc.now() - t)
      steps = steps + 1
    end
    while proc.now() - t0 < 0.8 and steps < 400 do
      step()
      proc.sleep(0.002)
    end
    -- a step that waited for Redis would have waited for that round trip to
    -- end, 5 s after the first failure: 4.2 s at least (a busy machine may
    -- deschedule a step, for far less than that)
    assert.is_true(slowest < 3, ("slowest step: %.3f s"):format(slowest))
    -- the worker's round trip times out: the local guards decide, and the
    -- next step says so
    assert.truthy(proc.wait_for(function () step(); return #logs > 0 end, 10), "nothing said")
    assert.are.equal("fallback", p:metrics().guards)
    assert.is_true(slowest < 3, ("slowest step: %.3f s"):format(slowest)) -- nor did these
    r:signal("CONT")
    p:close()
    -- lost once (and back, once Redis went on before the close)
    assert.are.equal(1, count(table.concat(logs, "\n"), LOST), table.concat(logs, "\n"))
    assert.matches("no reply in time", logs[1])
  end)

  -- A stopped Redis still takes connections: a blocking call's check
  -- before each retry reconnected on the call's own thread, and waited a
  -- whole command timeout (20 attempts 0.3 s apart took 13.7 s, not 5.7 s,
  -- with fleet.command_timeout=2000).  Its reconnects are the fleet's
  -- thread's now, after the reconnect backoff (50 ms here: before, every
  -- retry reconnected); the retries go on at once on the local guards.
  it("a stopped Redis (SIGSTOP) adds no wait between a run's retries: the reconnects are the fleet's thread's", function ()
    local policy = tmp .. "/stopped.lua"
    proc.writefile(policy, table.concat({
      'name = "stopped"', "max_attempts = 6", "deadline = 60", "attempt_timeout = 5",
      'backoff = { kind = "constant", initial = 0.1, jitter = "none" }',
      "budget = { max_tokens = 1000, token_ratio = 0.1 }", "" }, "\n"))
    local function run(extra)
      return proc.run_timed(proc.concat({ "run", policy, srv.base .. "/503" }, extra), { timeout = 120 })
    end
    local alone = run({})
    assert.are.equal(4, alone.code, alone.stderr)
    finally(function () r:signal("CONT") end)
    r:signal("STOP")
    local x = run({ "--redis", r.url, "--set", "fleet.key=" .. new_key(), "--set",
                    "fleet.command_timeout=2000", "--set", "fleet.reconnect=50" })
    r:signal("CONT")
    assert.are.equal(4, x.code, x.stderr) -- all 6 attempts, on the local guards
    assert.are.equal(1, count(x.stderr, LOST), x.stderr)
    assert.matches("no reply in time", x.stderr)
    -- the call's own time, from its first attempt (the first sync before
    -- it waited its command timeout, once): a command timeout before each
    -- of the 5 retries would be 10 s more than the run without Redis
    assert.is_true(x.elapsed < alone.elapsed + 2,
                   ("%.3f s with Redis stopped, %.3f s without Redis"):format(x.elapsed, alone.elapsed))
  end)

  it("a wrong password: one clear line, the local guards decide, the password never shown", function ()
    local r2 = redis.start { password = "s3cret-pw", tcp = true }
    finally(function () r2:stop() end)
    local wrong = { "unix://:wrong-pw-123@" .. r2.sock,
                    "redis://alice:wrong-pw-123@127.0.0.1:" .. r2.port .. "/0" }
    for _, url in ipairs(wrong) do
      local x = proc.run({ "run", BUDGET, srv.base .. "/503", "--redis", url, "--stats",
                           "--log-json", "-", "-v" })
      assert.are.equal(4, x.code, x.stderr)           -- 4 attempts: the local budget allows them
      assert.are.equal(1, count(x.stderr, LOST), x.stderr)
      assert.matches("AUTH", x.stderr)
      assert.matches("guards fallback", x.stderr)
      assert.falsy((x.stderr .. x.stdout):find("wrong-pw-123", 1, true))
      assert.falsy((x.stderr .. x.stdout):find("alice", 1, true))
    end
    -- the right one works, and is not shown either
    local ok = proc.run({ "run", BUDGET, srv.base .. "/200", "--redis", r2.url, "--stats", "-v",
                          "--set", "fleet.command_timeout=1000" })
    assert.are.equal(0, ok.code, ok.stderr)
    assert.matches("guards fleet", ok.stderr)
    local st = proc.run({ "fleet", BUDGET, "--redis", r2.url, "--set", "fleet.command_timeout=1000" })
    assert.are.equal(0, st.code, st.stderr)
    assert.matches("unix://%*%*%*@", st.stdout)
    assert.falsy((ok.stderr .. ok.stdout .. st.stdout .. st.stderr):find("s3cret", 1, true))
  end)

  it("an ACL user (redis://USER:PASSWORD@): AUTH user password; wrong or unpermitted said clearly, the password never shown; rediss:// refused", function ()
    local user, pw = "fleet-user", "acl-pw-7xq"
    assert.are.equal("OK", r:cli("ACL", "SETUSER", user, "reset", "on", ">" .. pw, "~luaretry:*",
                                 "+@all"))
    assert.are.equal("OK", r:cli("ACL", "SETUSER", "no-scripts", "reset", "on", ">" .. pw,
                                 "~luaretry:*", "+@all", "-@scripting"))
    assert.are.equal("OK", r:cli("ACL", "SETUSER", "other-keys", "reset", "on", ">" .. pw,
                                 "~other:*", "+@all"))
    -- scripts allowed, the SCRIPT command not: all the fleet needs (EVALSHA, EVAL)
    assert.are.equal("OK", r:cli("ACL", "SETUSER", "no-script-cmd", "reset", "on", ">" .. pw,
                                 "~luaretry:*", "+@all", "-script"))
    finally(function () r:cli("ACL", "DELUSER", user, "no-scripts", "other-keys", "no-script-cmd") end)
    local function url(u, p) return ("redis://%s:%s@127.0.0.1:%d/0"):format(u, p, r.port) end
    local function shown(...)
      local all = table.concat({ ... }, "\n")
      assert.falsy(all:find(pw, 1, true), all)
      assert.falsy(all:find("wrong-acl-pw", 1, true), all)
    end
    local key = new_key()
    -- the user's own: the fleet's, as `luaretry fleet` shows (the userinfo as ***)
    local ok = proc.run({ "run", BUDGET, srv.base .. "/503", "--redis", url(user, pw), "--stats",
                          "-v", "--log-json", "-", "--set", "fleet.key=" .. key, "--set",
                          "fleet.command_timeout=1000" })
    assert.are.equal(4, ok.code, ok.stderr)
    assert.matches("guards fleet", ok.stderr)
    local st = proc.run({ "fleet", BUDGET, "--redis", url(user, pw), "--set", "fleet.key=" .. key,
                          "--set", "fleet.command_timeout=1000" })
    assert.are.equal(0, st.code, st.stderr)
    assert.matches("redis://%*%*%*@127%.0%.0%.1:" .. r.port, st.stdout)
    assert.matches("budget: [%d.]+ of 10 tokens", st.stdout)
    shown(ok.stderr, ok.stdout, st.stdout, st.stderr)
    -- a user without the SCRIPT command runs the fleet, and `luaretry fleet` shows it
    local key2 = new_key()
    local ev = proc.run({ "run", BUDGET, srv.base .. "/503", "--redis", url("no-script-cmd", pw),
                          "--stats", "--set", "fleet.key=" .. key2, "--set", "fleet.command_timeout=1000" })
    assert.are.equal(4, ev.code, ev.stderr)
    assert.matches("guards fleet", ev.stderr)
    assert.falsy(ev.stderr:find("guards fallback", 1, true), ev.stderr)
    local evst = proc.run({ "fleet", BUDGET, "--redis", url("no-script-cmd", pw), "--set",
                            "fleet.key=" .. key2, "--set", "fleet.command_timeout=1000" })
    assert.are.equal(0, evst.code, evst.stderr)
    assert.matches("budget: [%d.]+ of 10 tokens", evst.stdout)
    shown(ev.stderr, ev.stdout, evst.stdout, evst.stderr)
    -- a wrong password, and a user that may not run scripts: one clear line each
    -- (no SCRIPT LOAD at connect: the first sync's EVALSHA is refused)
    -- (scripting is there: the ACL refuses it, and the message lists what
    -- the user needs, luaretry(1) --redis; spec/fleet_acl_spec.lua)
    local function needed(cmd)
      return cmd .. " refused: NOPERM[^\n]*'" .. cmd:lower() .. "' command %(the fleet's ACL user needs %+evalsha"
    end
    local cases = { { url(user, "wrong-acl-pw"), "AUTH", "AUTH" },
                    { url("no-scripts", pw), needed("EVALSHA"), needed("EVAL") },
                    -- scripting allowed, not the fleet's keys: the ACL's words, no hint
                    { url("other-keys", pw), "EVALSHA refused: NOPERM[^\n]*key",
                      "refused: NOPERM[^\n]*key" } }
    for _, c in ipairs(cases) do
      local x = proc.run({ "run", BUDGET, srv.base .. "/503", "--redis", c[1], "--stats", "-v",
                           "--log-json", "-", "--set", "fleet.command_timeout=1000" })
      assert.are.equal(4, x.code, x.stderr)           -- the local budget's 4 attempts
      assert.are.equal(1, count(x.stderr, LOST), x.stderr)
      assert.matches(c[2], x.stderr)
      assert.matches("guards fallback", x.stderr)
      local f = proc.run({ "fleet", BUDGET, "--redis", c[1], "--set", "fleet.command_timeout=1000" })
      assert.are_not.equal(0, f.code)
      assert.matches(c[3], f.stderr)
      shown(x.stderr, x.stdout, f.stdout, f.stderr)
    end
    -- TLS: refused before anything is sent, saying why
    local t = proc.run({ "run", BUDGET, srv.base .. "/200", "--redis",
                         ("rediss://%s:%s@127.0.0.1:%d/0"):format(user, pw, r.port) })
    assert.are_not.equal(0, t.code)
    assert.matches("TLS %(rediss://%) needs a hiredis built with TLS support", t.stderr)
    shown(t.stderr, t.stdout)
  end)

  -- The script counts failures in a row whatever the policy: a policy
  -- without a breaker (http's default) was shown one, "breaker: closed;
  -- 41 transient failures in a row".
  it("luaretry fleet shows only the policy's own guards: no breaker for a policy without one", function ()
    local key = new_key()
    for _ = 1, 3 do
      local x = proc.run(run_args(BUDGET, "/503", key))
      assert.truthy(x.code == 4 or x.code == 6, x.stderr)
    end
    local st = proc.run({ "fleet", BUDGET, "--redis", r.url, "--set", "fleet.key=" .. key,
                          "--set", "fleet.command_timeout=5000" })
    assert.are.equal(0, st.code, st.stderr)
    assert.matches("\n  budget: [%d.]+ of 10 tokens", st.stdout)
    assert.is_nil(st.stdout:find("breaker", 1, true), st.stdout)
    assert.is_nil(st.stdout:find("transient failures", 1, true), st.stdout)
    -- and the other way round: a breaker alone, no budget
    local st2 = proc.run({ "fleet", BREAKER, "--redis", r.url, "--set", "fleet.key=" .. key,
                           "--set", "budget=none", "--set", "fleet.command_timeout=5000" })
    assert.are.equal(0, st2.code, st2.stderr)
    assert.is_nil(st2.stdout:find("budget:", 1, true), st2.stdout)
  end)

  it("luaretry fleet shows every shared guard: budget, breaker, the throttle's window, the rate's leases", function ()
    local key = new_key()
    local policy = tmp .. "/every-guard.lua"
    proc.writefile(policy, table.concat({
      'name = "every-guard"', "max_attempts = 2", "deadline = 10",
      "backoff = { initial = 0.01, max = 0.02 }",
      "budget = { max_tokens = 10, token_ratio = 0.1 }",
      "breaker = { failures = 5, open_seconds = 30 }",
      "admission = { k = 100, window = 60 }", "rate = { limit = 50, burst = 5 }" }, "\n"))
    -- the second attempt: sent (4), or refused by the throttle (6), 2/3 of the time
    local x = proc.run(run_args(policy, "/503", key, { "-q" }))
    assert.truthy(x.code == 4 or x.code == 6, x.stderr)
    local failures = x.code == 4 and 2 or 1
    local st = proc.run({ "fleet", policy, "--redis", r.url, "--set", "fleet.key=" .. key,
                          "--set", "fleet.command_timeout=1000" })
    assert.are.equal(0, st.code, st.stderr)
    assert.matches(("budget: %d%%.000 of 10 tokens"):format(10 - failures), st.stdout)
    assert.matches(("breaker: closed; %d transient failures in a row"):format(failures), st.stdout)
    -- a request refused by the throttle is counted all the same
    assert.matches("admission window: 2 requests, 0 accepted over the last 60 s\n", st.stdout)
    assert.matches("rate: 50 per second for the fleet; slots leased out up to [%d.]+ s ahead %(%d+%)\n",
                   st.stdout)
    assert.matches("processes that synced in the last minute: 1\n", st.stdout)
    -- each named host:pid:n, n its nth policy sharing a fleet
    assert.matches("\n    [^:\n]+:%d+:1 +[%d.]+ s ago\n", st.stdout)
  end)

  it("an unreachable Redis: one clear line, the local guards decide, no wait beyond the connect timeout", function ()
    local urls = { "redis://127.0.0.1:1/0", "redis://192.0.2.1:6379/0" }  -- refused; TEST-NET-1
    for _, url in ipairs(urls) do
      local x = proc.run({ "run", BUDGET, srv.base .. "/503", "--redis", url, "--stats",
                           "--set", "fleet.connect_timeout=100" })
      assert.are.equal(4, x.code, x.stderr)
      assert.are.equal(1, count(x.stderr, LOST), x.stderr)
      assert.matches("guards fallback", x.stderr)
      -- three waits of at most 0.2 s; the first connect's 0.1 s; no more
      assert.is_true(x.secs < 2, ("%s: %.3f s"):format(url, x.secs))
    end
  end)

  it("luaretry fleet shows the state and --reset clears it; LUARETRY_REDIS names Redis", function ()
    local key = new_key()
    local a = proc.run(run_args(BREAKER, "/503", key, { "-q" }))
    assert.are.equal(4, a.code, a.stderr)
    local st = proc.readfile_cmd("env -u LUARETRY_REDIS " .. q(proc.bin) .. " fleet " ..
                                 q(BREAKER) .. " >/dev/null 2>&1; echo $?")
    assert.are.equal("2\n", st)                         -- no --redis, no LUARETRY_REDIS
    st = proc.run({ "fleet", BREAKER, "--set", "fleet.key=" .. key })
    assert.are.equal(2, st.code)                       -- no --redis, no LUARETRY_REDIS
    assert.matches("where is Redis%?", st.stderr)
    st = proc.readfile_cmd("env LUARETRY_REDIS=" .. q(r.url) .. " " .. q(proc.bin) ..
                           " fleet " .. q(BREAKER) .. " --set fleet.key=" .. q(key) ..
                           " --set fleet.command_timeout=1000 2>&1")
    assert.matches("fleet fleet%-breaker: luaretry:{" .. key:gsub("%-", "%%-") .. "}", st)
    assert.matches("breaker: open, opened at %d+%-%d+%-%d+ [%d:.]+ UTC", st)
    assert.matches("3 transient failures in a row", st)
    assert.matches("processes that synced in the last minute: 1\n", st)
    local slow_ok = { "--set", "fleet.command_timeout=1000", "--set", "fleet.key=" .. key }
    local reset = proc.run({ "fleet", BREAKER, "--redis", r.url, "--reset", table.unpack(slow_ok) })
    assert.are.equal(0, reset.code, reset.stderr)
    st = proc.run({ "fleet", BREAKER, "--redis", r.url, table.unpack(slow_ok) })
    assert.matches("no state in Redis", st.stdout)
    assert.matches("processes that synced in the last minute: 0", st.stdout)
    -- a policy with nothing to share, and a Redis that is not there
    -- (http.lua without its own budget and rate)
    local none = proc.run({ "fleet", proc.root .. "/policies/http.lua", "--redis", r.url,
                            "--set", "budget=none", "--set", "rate=none" })
    assert.are.equal(3, none.code)
    assert.matches("^luaretry: fleet http: %-%-redis names a Redis, but the policy has neither " ..
                   "budget, breaker, admission nor a fixed rate: there is nothing to share", none.stderr)
    local gone = proc.run({ "fleet", BREAKER, "--redis", "redis://127.0.0.1:1/0" })
    assert.are.equal(1, gone.code)
    assert.matches("^luaretry: fleet: redis://127%.0%.0%.1:1/0: connect", gone.stderr)
    local bad = proc.run({ "run", BREAKER, srv.base .. "/200", "--redis", "http://x" })
    assert.are.equal(2, bad.code)
    assert.matches("^luaretry: %-%-redis: redis URL: expected", bad.stderr)
  end)

  it("settings: fleet.key and fleet.sync in the script and by --set; fleet.redis is the host's; nothing to share is a warning", function ()
    local function write(name, src)
      proc.writefile(tmp .. "/" .. name, src)
      return tmp .. "/" .. name
    end
    local typo = write("typo.lua", "max_attempts = 2\ndeadline = 5\nbudget = {}\nfleet = { synk = 100 }\n")
    local c = proc.run({ "check", typo })
    assert.matches("fleet%.synk: unknown name, did you mean fleet%.sync%?", c.stderr .. c.stdout)
    local host = write("host.lua", "max_attempts = 2\ndeadline = 5\nfleet = { redis = 'redis://x' }\n")
    c = proc.run({ "check", host })
    assert.are.equal(3, c.code)
    assert.matches("fleet%.redis: the host says where Redis is", c.stderr .. c.stdout)
    local badkey = write("badkey.lua", "max_attempts = 2\ndeadline = 5\nfleet = { key = 'a b' }\n")
    c = proc.run({ "check", badkey })
    assert.are.equal(3, c.code)
    assert.matches("fleet%.key: expected 1 to 63 printable characters", c.stderr .. c.stdout)
    local bad_sync = proc.run({ "check", BUDGET, "--set", "fleet.sync=0" })
    assert.are.equal(3, bad_sync.code)
    assert.matches("fleet%.sync: expected a whole number from 1 to 60000", bad_sync.stderr .. bad_sync.stdout)
    -- a policy without budget or breaker: a warning, and no connection
    local x = proc.run({ "run", proc.root .. "/policies/http.lua", srv.base .. "/200", "--redis", r.url,
                         "--stats", "--set", "budget=none", "--set", "rate=none" })
    assert.are.equal(0, x.code, x.stderr)
    assert.matches("warning: .*fleet%.redis is set, but the policy has neither budget nor breaker", x.stderr)
    assert.matches("guards local", x.stderr)
    -- the module takes the host's settings like the other host-only fields
    local p = assert(lr.load(BUDGET, { ["fleet.redis"] = r.url, ["fleet.command_timeout"] = 2000 }))
    assert(p:set("fleet.sync", "25"))
    assert(p:fleet_sync())
    assert.matches("^luaretry:{fleet%-budget}$", p:fleet().key)   -- the policy's name
    local ok, err = p:set("fleet.redis", "redis://u:hunter2@host:99999/0")
    assert.falsy(ok)
    assert.matches("^fleet%.redis: redis URL", err)
    assert.falsy(err:find("hunter2", 1, true))
    assert(p:set("fleet.redis", "none"))
    assert.are.equal("local", p:metrics().guards)
    p:close()
    -- the key from a name with a space; setting an unreachable Redis waits for nothing
    local spaced = write("spaced.lua", "name = 'my svc'\nmax_attempts = 2\ndeadline = 5\nbudget = {}\n")
    local t0 = proc.now()
    local far = assert(lr.load(spaced, { ["fleet.redis"] = "redis://192.0.2.1:6379/0",
                                         ["fleet.connect_timeout"] = 5000 }))
    assert.is_true(proc.now() - t0 < 2.5)  -- the connect would take 5 s
    far:close()
    local named = assert(lr.load(spaced, { ["fleet.redis"] = r.url }))
    assert.are.equal("luaretry:{my_svc}", named:fleet().key)
    named:close()
    -- --redis none turns off what LUARETRY_REDIS turns on
    local off = proc.readfile_cmd("env LUARETRY_REDIS=" .. q(r.url) .. " " .. q(proc.bin) .. " run " ..
                                  q(BUDGET) .. " " .. q(srv.base .. "/200") ..
                                  " --redis none --stats 2>&1 >/dev/null")
    assert.matches("guards local", off)
    local on = proc.readfile_cmd("env LUARETRY_REDIS=" .. q(r.url) .. " " .. q(proc.bin) .. " run " ..
                                 q(BUDGET) .. " " .. q(srv.base .. "/200") ..
                                 " --set fleet.command_timeout=1000 --stats 2>&1 >/dev/null")
    assert.matches("guards fleet", on)
    -- simulate's --fleet goes with --clients, and draws no --svg
    local u = proc.run({ "simulate", BUDGET, "--fleet" })
    assert.are.equal(2, u.code)
    assert.matches("%-%-fleet needs %-%-clients N", u.stderr)
    u = proc.run({ "simulate", BUDGET, "--clients", "3", "--fleet", "--svg", tmp .. "/x.svg" })
    assert.are.equal(2, u.code)
  end)

  it("a reload or --set keeps the fleet (one connection) unless URL, key, sync or a timeout changes; a call in flight keeps its own", function ()
    local key, key2 = new_key(), new_key()
    local p = assert(lr.load(BUDGET, { ["fleet.redis"] = r.url, ["fleet.command_timeout"] = 1000,
                                      set = { ["fleet.key"] = key } }))
    local function clients()
      return tonumber(r:cli("INFO", "clients"):match("connected_clients:(%d+)"))
    end
    local before = clients()
    assert(p:fleet_sync())
    assert.are.equal(before + 1, clients())
    assert(p:set("budget.token_ratio", "0.2"))          -- new guard numbers, same fleet
    assert(p:reload(BUDGET))
    assert(p:fleet_sync())
    assert.are.equal(before + 1, clients())
    local c = assert(p:begin {})                        -- under the key of now
    assert(p:set("fleet.key", key2))                     -- a new fleet for the calls to come
    local d = c:report { status = 503 }                 -- counted by the call's own fleet
    assert.is_true(d.retry, d.message)
    c:close()                                           -- its last load goes: its count is sent
    assert.are.equal("1", r:cli("HGET", "luaretry:{" .. key .. "}", "fails"))
    assert(p:fleet_sync())
    assert.are.equal("1", r:cli("EXISTS", "luaretry:{" .. key2 .. "}"))
    proc.wait_for(function () return clients() == before + 1 end, 2)
    assert.are.equal(before + 1, clients())             -- the old connection is closed
    p:close()
  end)

  it("calls on the virtual clock, simulations and check's probes never touch Redis", function ()
    local key = new_key()
    local p = assert(lr.load(BUDGET, { ["fleet.redis"] = r.url, ["fleet.command_timeout"] = 1000,
                                      set = { ["fleet.key"] = key } }))
    local final = p:run(function () return 503, "busy" end, { virtual = true, seed = 1 })
    assert.are.equal("exhausted", final.verdict)
    local c = assert(p:begin { virtual = true })
    c:report { status = 503 }
    c:next()
    c:close()
    p:close()
    local env = "env LUARETRY_REDIS=" .. q(r.url) .. " "
    proc.readfile_cmd(env .. q(proc.bin) .. " simulate " .. q(BUDGET) .. " --clients 5 --fleet " ..
                      "--set fleet.key=" .. key .. " >/dev/null 2>&1")
    proc.readfile_cmd(env .. q(proc.bin) .. " check " .. q(BUDGET) .. " --set fleet.key=" .. key ..
                      " >/dev/null 2>&1")
    assert.are.equal("0", r:cli("EXISTS", "luaretry:{" .. key .. "}"))
    assert.are.equal("0", r:cli("EXISTS", "luaretry:{" .. key .. "}:procs"))
  end)
end)

-- --redis given for a policy with nothing to share changes nothing: said
-- even under -q.  No Redis is needed: such a policy never connects.
describe("--redis for a policy with nothing to share (no budget, breaker, admission or fixed rate)", function ()
  local NOWHERE = "redis://127.0.0.1:1/0"

  it("is a warning that -q prints, naming --redis or LUARETRY_REDIS; -s prints nothing", function ()
    local warn = "warning: gcs: %-%-redis names a Redis, but the policy has neither budget nor " ..
                 "breaker, admission or fixed rate"
    -- gcs.lua without its own budget and rate: nothing to share
    local OFF = { "--set", "budget=none", "--set", "rate=none" }
    local r = proc.run({ "run", "gcs", OFF[1], OFF[2], OFF[3], OFF[4], "-q", "--redis", NOWHERE, "--", "true" })
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("^luaretry: " .. warn .. ": there is nothing to share\n$", r.stderr)
    r = proc.run({ "run", "gcs", OFF[1], OFF[2], OFF[3], OFF[4], "-q", "--", "true" }, { env = { "LUARETRY_REDIS=" .. NOWHERE } })
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("LUARETRY_REDIS names a Redis", r.stderr)
    r = proc.run({ "run", "gcs", OFF[1], OFF[2], OFF[3], OFF[4], "-s", "--redis", NOWHERE, "--", "true" })
    assert.are.equal("", r.stderr)
    -- without -q the library's own warning says it, once
    r = proc.run({ "run", "gcs", OFF[1], OFF[2], OFF[3], OFF[4], "--redis", NOWHERE, "--", "true" })
    local _, n = r.stderr:gsub("nothing to share", "")
    assert.are.equal(1, n, r.stderr)
    -- a budget (gcs.lua's own) is something to share: no warning, and the
    -- unreachable Redis leaves the local guards deciding
    r = proc.run({ "run", "gcs", "-q", "--set", "budget.max_tokens=10", "--redis", NOWHERE, "--", "true" })
    assert.are.equal(0, r.code, r.stderr)
    assert.is_nil(r.stderr:find("nothing to share", 1, true), r.stderr)
  end)
end)
