-- The fleet's rate limiter (README "Fleet"): one token bucket (a GCRA) for
-- every process naming the same Redis.  Real `luaretry run --urls
-- --parallel-max` batches against the fault server and a real redis-server,
-- measured in the server's request log; the same batches without Redis
-- (a limit per process); a Redis that answers the rate script with
-- garbage, slowly or not at all (spec/fixtures/fleet/fake_redis.lua); settings that
-- disagree; an adaptive rate, which stays the process's.
local proc = require "support.proc"
local redis = require "support.redis"
local fleet = require "support.fleet"

local DIR = proc.root .. "/spec/fixtures/fleet_rate"
local RATE = DIR .. "/rate.lua"
local ADAPTIVE = DIR .. "/adaptive.lua"
local SERVER = DIR .. "/server.lua"
local LOST = "local guards decide until Redis is back"

local LIMIT, BURST = 20, 1 -- rate.lua's
local PROCS, URLS, PARALLEL = 4, 30, 4
local BLOCK = 2 -- the most a process leases at once: a tenth of a second of LIMIT

local new_key, count, many = fleet.keys("rate"), fleet.count, fleet.many
local times, most_in, fake = fleet.times, fleet.most_in, fleet.fake

-- A file of n URLs on the server (distinct queries: each its own call).
local function urls_file(dir, srv, n, tag)
  local lines = {}
  for i = 1, n do lines[i] = ("%s/200?%s=%d"):format(srv.base, tag, i) end
  local path = dir .. "/" .. tag .. ".txt"
  proc.writefile(path, table.concat(lines, "\n") .. "\n")
  return path
end

describe("the fleet's rate limiter against a real Redis", function ()
  local r, srv, tmp
  redis.with_redis({ server = SERVER }, function (x, t, s) r, tmp, srv = x, t, s end)

  it("holds 4 batches to one limit (within limit*T + burst + their leased blocks over 2 s), not 4 limits, as simulate --fleet predicts", function ()
    local key = new_key()
    local function batch(i, redis_url)
      local a = { "run", RATE, "--urls", urls_file(tmp, srv, URLS, "p" .. i), "--parallel-max",
                  tostring(PARALLEL), "-s", "--set",
                  "fleet.key=" .. key, "--set", "fleet.command_timeout=1000" }
      if redis_url then a[#a + 1] = "--redis"; a[#a + 1] = redis_url end
      return a
    end
    srv:reset()
    r:cli("CONFIG", "RESETSTAT")
    for i, x in ipairs(many(PROCS, function (i) return batch(i, r.url) end)) do
      assert.are.equal(0, x.code, "process " .. i .. ": " .. x.stderr)
      assert.are.equal(0, count(x.stderr, LOST), x.stderr)
    end
    local fleet = times(srv, "/200")
    assert.are.equal(PROCS * URLS, #fleet)
    local bound = LIMIT * 2 + BURST + PROCS * BLOCK
    local fleet_most = most_in(fleet, 2)
    print(("\n  fleet-wide: at most %d requests in any 2 s (bound %d, half the limit %d); " ..
           "%d requests over %.2f s: %.1f per second"):format(fleet_most, bound, LIMIT, #fleet,
           fleet[#fleet] - fleet[1], (#fleet - 1) / (fleet[#fleet] - fleet[1])))
    assert.is_true(fleet_most <= bound, fleet_most .. " > " .. bound)
    assert.is_true(fleet_most > LIMIT, fleet_most .. " <= " .. LIMIT)
    -- the request path is cheap: a round trip leases a block of slots
    local trips = tonumber(r:cli("INFO", "commandstats"):match("cmdstat_evalsha:calls=(%d+)"))
    print(("  round trips to Redis (EVALSHA): %d for %d attempts"):format(trips, #fleet))
    assert.is_true(trips < #fleet, trips .. " round trips")
    -- Redis holds the bucket: its theoretical arrival time and settings
    assert.matches("rate.limit=20 rate.burst=1", r:cli("HGET", "luaretry:{" .. key .. "}:rate", "cfg"))

    -- the model: the same requests, one bucket on the virtual clock
    local sim = proc.run({ "simulate", RATE, "--clients", tostring(PROCS * URLS), "--fleet",
                           "--outage", "0", "--json" })
    assert.are.equal(0, sim.code, sim.stderr)
    local m = proc.json.decode(sim.stdout)
    local span = fleet[#fleet] - fleet[1]
    print(("  simulate --fleet: the last attempt at %.3f s; the real fleet's span %.3f s")
          :format(m.fleet.last_attempt, span))
    assert.is_true(math.abs(m.fleet.last_attempt - span) <= 0.15 * m.fleet.last_attempt,
                   ("model %.3f s, real %.3f s"):format(m.fleet.last_attempt, span))
    assert.are.equal(0, m.own.last_attempt) -- a bucket each: nothing waits

    -- without Redis: a limit per process, several times the fleet's
    srv:reset()
    for i, x in ipairs(many(PROCS, function (i) return batch(i) end)) do
      assert.are.equal(0, x.code, "process " .. i .. ": " .. x.stderr)
    end
    local own_most = most_in(times(srv, "/200"), 2)
    print(("  per process: at most %d requests in any 2 s"):format(own_most))
    assert.is_true(own_most > 1.5 * bound, own_most .. " <= " .. 1.5 * bound)
  end)

  -- The fleet's bucket taken some seconds ahead (as a busy fleet would
  -- have it): a call waits its turn when its deadline allows, and stops at
  -- once (rate_limit, exit 6) when it does not.  The calls that must stop
  -- (deadline 2 s) find it 8 s ahead: a busy machine's start-up of the
  -- process (seconds under ASan beside a build) must not bring the turn
  -- within their deadline.
  it("queues a call behind a busy fleet, or stops it at once when its turn comes after its deadline", function ()
    local key = new_key()
    local taken -- proc.now() before the slot was taken `ahead` s ahead
    local function busy(ahead)
      taken = proc.now()
      local sec, usec = r:cli("TIME"):match("^(%d+)\n(%d+)$")
      local now_us = tonumber(sec) * 1000000 + tonumber(usec)
      r:cli("HSET", "luaretry:{" .. key .. "}:rate", "tat", tostring(now_us + ahead * 1000000),
            "cfg", "rate.limit=20 rate.burst=1", "cfg_at", tostring(now_us), "cfg_by", "spec")
    end
    local function run(deadline)
      local log = tmp .. "/log.json"
      local t0 = proc.now()
      local x = proc.run({ "run", RATE, srv.base .. "/200", "--redis", r.url, "--set",
                           "fleet.key=" .. key, "--set", "fleet.command_timeout=1000", "--set",
                           "deadline=" .. deadline, "--log-json", log })
      return x, proc.now() - t0, proc.readfile(log) or ""
    end
    srv:reset()
    busy(8)
    local x, _, log = run(2)
    assert.are.equal(6, x.code, x.stderr)
    -- at once on the engine's own clock (from the call's start; a busy
    -- machine's start-up is not in it), not at the deadline (2 s)
    local at = 0
    for _, line in ipairs(proc.lines(log)) do
      local o = proc.json.decode(line)
      if o.elapsed then at = math.max(at, o.elapsed) end
    end
    assert.is_true(at < 1, ("decided at %.3f s"):format(at))
    assert.matches('"verdict": ?"rate_limit"', log)
    assert.matches("the fleet's rate limiter's next token (20 per second for every process) " ..
                   "comes too late for the deadline", log, 1, true)
    assert.are.equal(1, count(x.stderr, "before attempt 1: rate_limit"), x.stderr)
    -- -q's one line for the failure (it came twice: the stop's and the
    -- call's end's), naming the latest start the token misses, not the
    -- moment the attempt was asked (it said "would start at 0.005 s")
    busy(8)
    local quiet = proc.run({ "run", RATE, srv.base .. "/200", "--redis", r.url, "--set",
                             "fleet.key=" .. key, "--set", "fleet.command_timeout=1000", "--set",
                             "deadline=2", "-q" })
    assert.are.equal(6, quiet.code, quiet.stderr)
    assert.are.equal(1, count(quiet.stderr, "\n"), quiet.stderr)
    assert.matches("^luaretry: before attempt 1: rate_limit %(rate%): the fleet's rate limiter's " ..
                   "next token %(20 per second for every process%) comes too late for the " ..
                   "deadline %(2%.000 s%): after 1%.999 s, the latest an attempt may start", quiet.stderr)
    assert.are.equal(0, #srv:requests_on("/200"))
    busy(4)
    x = run(30)
    assert.are.equal(0, x.code, x.stderr)
    -- measured from the moment the slot was taken, not the process's start
    -- (which a busy machine may delay): the turn came 4 s after it
    local queued = proc.now() - taken
    assert.is_true(queued >= 3.9, ("%.3f s"):format(queued))
    assert.are.equal(1, #srv:requests_on("/200"))
  end)

  it("refuses a process whose rate settings differ from the fleet's: it limits itself, saying why once", function ()
    local key = new_key()
    local base = { "run", RATE, srv.base .. "/200", "--redis", r.url, "--set",
                   "fleet.key=" .. key, "--set", "fleet.command_timeout=1000" }
    local first = proc.run(base)
    assert.are.equal(0, first.code, first.stderr)
    -- a fixed rate is something to share
    assert.is_nil(first.stderr:find("nothing to share", 1, true), first.stderr)
    local args = { table.unpack(base) }
    args[#args + 1] = "--set"
    args[#args + 1] = "rate.limit=10"
    local other = proc.run(args)
    assert.are.equal(0, other.code, other.stderr)
    assert.matches("the rate key is shared with other settings %(theirs: rate.limit=20 " ..
                   "rate.burst=1; ours: rate.limit=10 rate.burst=1%)", other.stderr)
    assert.are.equal(1, count(other.stderr, LOST), other.stderr)
    assert.matches("rate.limit=20", r:cli("HGET", "luaretry:{" .. key .. "}:rate", "cfg"))
    -- `luaretry fleet --reset` clears the rate bucket too: the other
    -- settings are welcome then
    local reset = proc.run({ "fleet", RATE, "--redis", r.url, "--set", "fleet.key=" .. key, "--set",
                             "fleet.command_timeout=1000", "--reset" })
    assert.are.equal(0, reset.code, reset.stderr)
    assert.are.equal("0", r:cli("EXISTS", "luaretry:{" .. key .. "}:rate"))
    other = proc.run(args)
    assert.are.equal(0, other.code, other.stderr)
    -- not refused (a reply late on a busy machine is another matter, and
    -- said as such: final109's "69 ms late")
    assert.is_nil(other.stderr:find("shared with other settings", 1, true), other.stderr)
    assert.matches("rate.limit=10", r:cli("HGET", "luaretry:{" .. key .. "}:rate", "cfg"))
  end)

  -- the script writes the bucket's time as %.17g, with a fraction when a
  -- slot's interval is no whole number of µs (a limit of 3 per second):
  -- `luaretry fleet` read it as a whole number and showed 0 s ahead
  it("fleet shows how far ahead the slots are leased when the bucket's time has a fraction", function ()
    local key = new_key()
    local sec, usec = r:cli("TIME"):match("^(%d+)\n(%d+)$")
    local now_us = tonumber(sec) * 1000000 + tonumber(usec)
    r:cli("HSET", "luaretry:{" .. key .. "}:rate", "tat", ("%d.5"):format(now_us + 4000000))
    local x = proc.run({ "fleet", RATE, "--redis", r.url, "--set", "fleet.key=" .. key })
    assert.are.equal(0, x.code, x.stderr)
    local ahead = tonumber(x.stdout:match("slots leased out up to ([%d.]+) s ahead"))
    assert.is_true(ahead ~= nil and ahead > 2 and ahead <= 4, x.stdout)
  end)

  -- final119, beside other jobs: Redis took more than fleet.command_timeout
  -- (100 ms) to answer `luaretry fleet`, which is a look, not a call
  it("fleet waits up to 2 s for a slow Redis's reply, not a call's command timeout", function ()
    local key = new_key()
    assert.are.equal("OK", r:cli("CLIENT", "PAUSE", "600", "ALL"))
    local x = proc.run({ "fleet", RATE, "--redis", r.url, "--set", "fleet.key=" .. key })
    assert.are.equal(0, x.code, x.stderr)
    -- (a --set fleet.command_timeout is left as given: not asserted here,
    -- where the pause would race the process's start, final122)
  end)

  it("leaves an adaptive rate to each process: the budget is shared, no rate key is written", function ()
    local key = new_key()
    local x = proc.run({ "run", ADAPTIVE, srv.base .. "/200", "-s", "--redis", r.url, "--set",
                         "fleet.key=" .. key, "--set", "fleet.command_timeout=1000" })
    assert.are.equal(0, x.code, x.stderr)
    assert.are.equal("1", r:cli("EXISTS", "luaretry:{" .. key .. "}"))
    assert.are.equal("0", r:cli("EXISTS", "luaretry:{" .. key .. "}:rate"))
  end)

  it("refuses bad rate settings at load, before Redis is asked", function ()
    local key = new_key()
    for _, set in ipairs { "rate.limit=0", "rate.limit=nan", "rate.limit=-1", "rate.limit=inf",
                           "rate.burst=0" } do
      local x = proc.run({ "run", RATE, srv.base .. "/200", "--redis", r.url, "--set",
                           "fleet.key=" .. key, "--set", set })
      assert.are.equal(3, x.code, set .. ": " .. x.stderr)
      assert.matches("%-%-set " .. set:match("^[^=]+"):gsub("%.", "%%.") .. ": expected", x.stderr)
    end
    assert.are.equal("0", r:cli("EXISTS", "luaretry:{" .. key .. "}:rate"))
    assert.are.equal("0", r:cli("EXISTS", "luaretry:{" .. key .. "}"))
  end)
end)

describe("the fleet's rate limiter against a hostile Redis", function ()
  local srv, tmp
  proc.with_server(SERVER, function (s, t) srv, tmp = s, t end)

  -- A rate script answered with garbage, late or never: the batch goes
  -- on under the local limiter at once, says so once, and ends in time.
  local cases = {
    { "rate-garbage", "out of range: more slots than were asked" },
    { "rate-far", "out of range: a next slot that does not agree with its wait" },
    { "rate-nil", "not 4 integers" },
    { "rate-silent", nil },
    { "rate-slow", nil },
  }
  for _, case in ipairs(cases) do
    local mode, why = case[1], case[2]
    it("a rate script that is " .. mode:sub(6) .. ": local limiting at once, said once", function ()
      local f = fake(mode)
      finally(f.stop)
      srv:reset()
      local t0 = proc.now()
      local x = proc.run({ "run", RATE, "--urls", urls_file(tmp, srv, 10, "h"), "--parallel-max", "4",
                           "--redis", f.url(), "--set",
                           "fleet.command_timeout=500" }, { timeout = 30 })
      local secs = proc.now() - t0
      assert.are.equal(0, x.code, x.stderr)
      assert.are.equal(1, count(x.stderr, LOST), x.stderr)
      -- the reply's range check, or (a machine too busy to answer within
      -- the lease's 50 ms) the worker's timeout: either goes local
      if why then
        assert.is_truthy(x.stderr:find(why, 1, true) or
                         x.stderr:find("late; local guards decide", 1, true), x.stderr)
      end
      assert.is_nil(x.stderr:find("runtime error", 1, true), x.stderr)
      assert.are.equal(10, #srv:requests_on("/200"))
      -- asked once, then again only as the reconnect backoff (250 ms at
      -- least) allows: the other calls went local at once
      local asks = count(f.log(), "EVAL rate") + count(f.log(), "EVALSHA rate")
      assert.is_true(asks >= 1 and asks <= 1 + secs / 0.25, asks .. " asks in " .. secs .. " s")
      -- the local limiter paced them (9 intervals of 50 ms), not all at once,
      -- and none waited on Redis: one round trip of 0.5 s at most, then 10
      -- tokens at 20 a second (a wait on Redis for each: 5 s or more).  As
      -- the server saw them: the process's start under ASan on a busy
      -- machine is no part of it (8.2 s once, for 5)
      local t = times(srv, "/200")
      assert.is_true(t[#t] - t[1] >= 0.3, ("10 requests in %.3f s"):format(t[#t] - t[1]))
      assert.is_true(t[#t] - t[1] < 3, ("10 requests in %.3f s"):format(t[#t] - t[1]))
      assert.is_true(secs < 30, ("%.3f s"):format(secs))
    end)
  end

  -- No step waits for the rate script: the handle's worker asks, the call
  -- asks again a few ms later, and once the script is slower than usual
  -- (50 ms, or eight usual round trips) the local limiter decides.
  it("a silent Redis holds no call and no exit, whatever the command timeout", function ()
    local f = fake("rate-silent")
    finally(f.stop)
    srv:reset()
    local log = tmp .. "/log.json"
    local t0 = proc.now()
    local x = proc.run({ "run", RATE, srv.base .. "/200", "--redis", f.url(), "--set",
                         "fleet.command_timeout=10000", "--set", "deadline=1", "--log-json", log },
                       { timeout = 30 })
    local secs = proc.now() - t0
    assert.are.equal(0, x.code, x.stderr)
    -- the worker's round trip (10 s) is cut short at exit: the deadline
    -- (1 s) and a margin for a busy machine's start-up and exit
    assert.is_true(secs < 1 + 5, ("%.3f s"):format(secs))
    assert.matches('"verdict": ?"success"', proc.readfile(log) or "")
    assert.are.equal(1, #srv:requests_on("/200"))
    assert.is_true(count(f.log(), "EVAL rate") + count(f.log(), "EVALSHA rate") >= 1, f.log())
  end)
end)
