-- The fleet's client-side throttle, throttling answers and hedges (README
-- "Fleet"): real `luaretry run` processes and this process (through the
-- Lua module) share a policy's throttle, budget and breaker through a real
-- redis-server, against the real fault server.  Each test has a fleet key
-- of its own.
local proc = require "support.proc"
local redis = require "support.redis"
local fleet = require "support.fleet"
local lr = require "luaretry"

local DIR = proc.root .. "/spec/fixtures/fleet_throttle/"
local THROTTLE, REFUSE, FAST = DIR .. "throttle.lua", DIR .. "refuse.lua", DIR .. "fast.lua"
local COST, HEDGE = DIR .. "cost.lua", DIR .. "hedge.lua"

local LOST = "local guards decide until Redis is back"
local FLEET_SAYS = "the fleet's admission control refuses"
local LOCAL_SAYS = "^admission control refuses"

local new_key, count, many = fleet.keys("thr"), fleet.count, fleet.many

describe("the fleet's admission control (client-side throttle)", function ()
  local r, tmp, srv
  redis.with_redis({ server = DIR .. "server.lua" }, function (x, t, s) r, tmp, srv = x, t, s end)

  -- A healthy Redis on a busy machine may take more than the default
  -- 100 ms to answer: 1 s here, except where Redis goes away.
  local function run_args(policy, key, extra)
    local a = { "run", policy, "--redis", r.url, "--set", "fleet.key=" .. key,
                "--set", "fleet.command_timeout=1000" }
    for _, x in ipairs(extra or {}) do a[#a + 1] = x end
    return a
  end

  it("counts every process's requests: one process's refusals raise another's", function ()
    local key, fresh = new_key(), new_key()
    local urls = tmp .. "/urls"
    local list = {}
    for i = 1, 10 do list[i] = srv.base .. "/503?" .. i end
    proc.writefile(urls, table.concat(list, "\n") .. "\n")
    srv:reset()
    -- process A: 10 calls against a 503, each one request to the throttle
    local a = proc.run(run_args(REFUSE, key, { "--urls", urls, "-s" }))
    assert.is_true(a.code ~= 0, a.stderr)
    assert.is_true(#srv:requests_on("/503") <= 10)
    -- processes B: a service that answers, but the fleet has seen 10
    -- requests and no accept (the refusal is 10/11 and more); with a key
    -- of their own, the same seeds go through
    local refused = 0
    for seed = 1, 5 do
      local b = proc.run(run_args(REFUSE, key, { srv.base .. "/200", "--seed", tostring(seed) }))
      if b.code == 6 then
        refused = refused + 1
        assert.matches(FLEET_SAYS, b.stderr)
      else
        assert.are.equal(0, b.code, b.stderr)
      end
      local own = proc.run(run_args(REFUSE, fresh .. seed, { srv.base .. "/200", "--seed", tostring(seed) }))
      assert.are.equal(0, own.code, own.stderr)
    end
    assert.is_true(refused >= 4, "refused: " .. refused)
    -- what Redis holds: the window's requests in its buckets
    local total = 0
    for i = 0, 9 do total = total + (tonumber(r:cli("HGET", "luaretry:{" .. key .. "}", "tr" .. i)) or 0) end
    assert.are.equal(15, total)
    -- a throttle alone is something to share: no warning, and `luaretry
    -- fleet` knows the policy's fleet
    local quiet = proc.run(run_args(REFUSE, key, { srv.base .. "/200", "-q" }))
    assert.is_nil(quiet.stderr:find("nothing to share", 1, true), quiet.stderr)
    local st = proc.run({ "fleet", REFUSE, "--redis", r.url, "--set", "fleet.key=" .. key,
                          "--set", "fleet.command_timeout=1000" })
    assert.are.equal(0, st.code, st.stderr)
  end)

  it("counts a workflow's requests and their accepts alike: healthy workflows are never refused", function ()
    local key = new_key()
    for i = 1, 6 do
      local w = proc.run(run_args(DIR .. "workflow.lua", key, { srv.base .. "/200", "--seed", tostring(i) }))
      assert.are.equal(0, w.code, "workflow " .. i .. ": " .. w.stderr)
      assert.are.equal("four answered\n", w.stdout)
    end
    local st = proc.run({ "fleet", DIR .. "workflow.lua", "--redis", r.url, "--set", "fleet.key=" .. key,
                          "--set", "fleet.command_timeout=1000" })
    assert.are.equal(0, st.code, st.stderr)
    assert.matches("admission window: 24 requests, 24 accepted over the last 60 s", st.stdout)
  end)

  -- The run is built so that the count is decided by the seeds, not by
  -- the machine's speed: the service answers nothing before 5 s after the
  -- first request (and each request 1.5 s after it came), so every
  -- process has begun (and synced, finding no counts) before any sends
  -- its own (checked: the server saw 30 requests before it answered
  -- one); each then asks about its second attempt on its own counts,
  -- 1 request and no accept (a refusal of exactly 1/2), with the same
  -- draw as the model's client of the same seed; only the third attempts
  -- (a few of 30) depend on when the processes' batches land.  A process
  -- that could not reach Redis in 1 s would decide alone and push the
  -- count to the model's "own guards" figure, 15% above.
  it("30 processes against a 503 send what simulate --clients 30 --fleet predicts, within 10%", function ()
    local key = new_key()
    srv:reset()
    local res = many(30, function (i)
      return run_args(THROTTLE, key, { srv.base .. "/503slow", "--seed", tostring(i) })
    end)
    local seen = fleet.times(srv, "/503slow")
    local sent = #seen
    local held = 0
    for _, t in ipairs(seen) do if t < seen[1] + 5 then held = held + 1 end end
    assert.are.equal(30, held, "requests before the first answer (5 s): the 30 first attempts")
    for i, x in ipairs(res) do
      assert.truthy(x.code == 6 or x.code == 4, "process " .. i .. ": " .. tostring(x.code) .. x.stderr)
      assert.are.equal(0, count(x.stderr, LOST), x.stderr)
    end
    local sim = proc.run({ "simulate", THROTTLE, "--clients", "30", "--fleet", "--seed", "1", "--json" })
    assert.are.equal(0, sim.code, sim.stderr)
    local m = proc.json.decode(sim.stdout)
    assert.is_true(math.abs(sent - m.fleet.attempts) <= 0.1 * m.fleet.attempts,
                   ("model %d, real %d requests"):format(m.fleet.attempts, sent))
    -- and the fleet's counts are what made the difference
    assert.is_true(m.fleet.attempts < m.own.attempts,
                   ("fleet %d, own %d"):format(m.fleet.attempts, m.own.attempts))
  end)

  it("Redis gone: the local throttle decides at once, said once, no call past its deadline", function ()
    local logs = {}
    local opts = { ["fleet.redis"] = r.url, ["fleet.command_timeout"] = 300,
                   set = { ["fleet.key"] = new_key() },
                   log = function (line) logs[#logs + 1] = line end }
    local p = assert(lr.load(FAST, opts))
    assert(p:fleet_sync())
    finally(function () if not r.pid then r:restart() end end)
    r:kill()
    local slowest, latest, said = 0, 0, {}
    for i = 1, 40 do
      local t = proc.now()
      local c = assert(p:begin { seed = i })
      local d = c:next()
      while d.retry do
        d = c:report { status = 503 }
        if d.retry then d = c:next() end
      end
      c:close()
      slowest = math.max(slowest, proc.now() - t)
      latest = math.max(latest, d.elapsed)
      if d.verdict == "admission" then said[#said + 1] = d.message end
      proc.sleep(0.002)                     -- the worker's round trip finds Redis gone meanwhile
    end
    p:close()
    assert.are.equal(1, #logs, table.concat(logs, "\n"))
    assert.matches(LOST, logs[1])
    -- a deadline of 1 s, each call's last decision within it on the
    -- engine's own clock; a round trip to a dead Redis fails at once, and
    -- no call is held (wall time, with a margin for a busy machine)
    assert.is_true(latest <= 1, ("a call decided at %.3f s"):format(latest))
    assert.is_true(slowest < 1 + 2, ("slowest call: %.3f s"):format(slowest))
    -- the local throttle's own counts refuse, and say whose they are
    assert.is_true(#said >= 20, "refusals: " .. #said)
    assert.matches(LOCAL_SAYS, said[#said])
    assert.is_nil(said[#said]:find("fleet's", 1, true), said[#said])
  end)

  it("a throttling answer costs the fleet what it costs locally: throttle_cost tokens, and no breaker failure", function ()
    local key = new_key()
    -- locally: 5 answers of 429 at 0.5 tokens each
    local l = proc.run({ "run", COST, srv.base .. "/429", "--stats=json", "-s" })
    assert.are.equal(4, l.code, l.stderr)
    local stats = proc.json.decode(l.stderr:match("{.*}"))
    assert.are.equal(5, stats.throttled)
    assert.are.equal(7.5, stats.budget_tokens)
    -- the fleet's: the same, and a breaker of 3 failures not opened by 5
    local f = proc.run(run_args(COST, key, { srv.base .. "/429", "-s" }))
    assert.are.equal(4, f.code, f.stderr)
    local h = "luaretry:{" .. key .. "}"
    assert.are.equal("7500", r:cli("HGET", h, "tokens"))
    assert.are.equal("0", r:cli("HGET", h, "fails"))
    assert.are.equal("0", r:cli("HGET", h, "state"))
    -- a transient failure costs a whole token, and 3 in a row open it.
    -- The process asks the breaker as of its last sync (50 ms here), so
    -- a retry decided before the sync that opened it may still go: 3 or
    -- 4 failures, never all 5 attempts, each charged a whole token.
    local key2 = new_key()
    local g = proc.run(run_args(COST, key2, { srv.base .. "/503", "-s" }))
    assert.are.equal(6, g.code, g.stderr)
    local failures = #srv:requests_on("/503")
    assert.is_true(failures == 3 or failures == 4, "503s: " .. failures)
    assert.are.equal(tostring(10000 - 1000 * failures), r:cli("HGET", "luaretry:{" .. key2 .. "}", "tokens"))
    assert.are.equal("1", r:cli("HGET", "luaretry:{" .. key2 .. "}", "state"))
  end)

  it("a hedge takes no token from the fleet's budget as it goes (failures charge it)", function ()
    local key = new_key()
    local x = proc.run(run_args(HEDGE, key, { srv.base .. "/slow", "--stats=json", "-s" }))
    assert.are.equal(0, x.code, x.stderr)
    local stats = proc.json.decode(x.stderr:match("{.*}"))
    assert.are.equal(1, stats.hedges)
    -- 10 tokens, none spent by the hedge, the success's 0.1 capped at 10
    assert.are.equal("10000", r:cli("HGET", "luaretry:{" .. key .. "}", "tokens"))
  end)
end)
