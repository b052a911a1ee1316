-- simulate and a real run share one engine: with the same seed and the same
-- overrides, the waits are the same, to the microsecond the logs print.
local proc = require "support.proc"

local SETS = { "--set", "max_attempts=5", "--set", "backoff.initial=0.02",
               "--set", "backoff.jitter_max=0.05", "--seed", "7" }

local function waits_of(jsonl)
  local waits = {}
  for _, line in ipairs(proc.lines(jsonl)) do
    local d = proc.json.decode(line)
    if d.verdict == "retry" then waits[#waits + 1] = d.wait end
  end
  return waits
end

local function with_sets(args)
  for _, a in ipairs(SETS) do args[#args + 1] = a end
  return args
end

describe("simulate and run", function ()
  local srv
  setup(function () srv = proc.server(proc.root .. "/spec/fixtures/run/server.lua") end)
  teardown(function () if srv then srv:stop() end end)

  it("give the same waits for the same seed", function ()
    local sim = proc.run(with_sets { "simulate", proc.root .. "/policies/http.lua", "--json" },
                         { timeout = 30 })
    assert.are.equal(0, sim.code, sim.stderr)
    local log = os.tmpname()
    local run = proc.run(with_sets { "run", proc.root .. "/policies/http.lua",
                                     srv.base .. "/always503", "-q", "--log-json", log },
                         { timeout = 30 })
    assert.are.equal(4, run.code, run.stderr)
    local simulated, real = waits_of(sim.stdout), waits_of(proc.readfile(log))
    os.remove(log)
    assert.are.equal(4, #simulated)
    assert.are.same(simulated, real)
    -- and they are jittered: not all the same distance above the backoff
    assert.are_not.equal(simulated[2] - 0.04, simulated[1] - 0.02)
  end)
end)

-- The guards that act as an attempt goes (luaretry_call_next): a fixed
-- rate limiter's token and header pacing's slot.  simulate, check's probes
-- and run take the same steps, so they come to the same stops, and a wait
-- shown is the whole wait before the next attempt.
describe("simulate, check and run under a rate limiter and header pacing", function ()
  local srv, dir
  proc.with_server(proc.root .. "/spec/fixtures/simulate_run/server.lua",
                   function (s, t) srv, dir = s, t end)

  local function base()
    local path = dir .. "/base.lua"
    proc.writefile(path, "-- base\nmax_attempts = 4\ndeadline = 10\nattempt_timeout = 2\n" ..
                   "backoff = { initial = 0.05, max = 0.2, jitter = 'none' }\n")
    return path
  end

  local function decisions(jsonl)
    local t = {}
    for _, line in ipairs(proc.lines(jsonl)) do
      local d = proc.json.decode(line)
      if not d.summary then t[#t + 1] = d end
    end
    return t
  end

  -- run's log tells a wait luaretry_call_next adds (a rate token, a
  -- pacing slot) in an object of its own, status null, verdict retry;
  -- simulate adds it to the retry's wait: folded here as simulate shows it
  local function folded(ds)
    local t = {}
    for _, d in ipairs(ds) do
      if d.verdict == "retry" and type(d.status) ~= "number" and #t > 0 then
        t[#t].wait = t[#t].wait + d.wait
        t[#t].wait_source = d.wait_source
        t[#t].added = (t[#t].added or 0) + 1
      else
        t[#t + 1] = d
      end
    end
    return t
  end

  local function verdicts(ds)
    local t = {}
    for i, d in ipairs(ds) do t[i] = ("%d %s"):format(d.attempt, d.verdict) end
    return t
  end

  local function args(list, ...)
    for _, a in ipairs { ... } do list[#list + 1] = a end
    return list
  end

  -- check's row for a probe: its verdict and wait columns (two blanks or
  -- more between columns; "rate 2 s" is one)
  local function row(stdout, label)
    for line in stdout:gmatch("[^\n]+") do
      if line:sub(1, #label + 3) == "  " .. label .. " " then
        local cols = {}
        local rest = line:sub(#label + 3):gsub("^%s+", ""):gsub("%s%s+", "\t")
        for c in rest:gmatch("[^\t]+") do cols[#cols + 1] = c end
        return cols[1], cols[2]
      end
    end
  end

  it("a fixed rate whose next token comes after the deadline: all three stop with rate_limit", function ()
    -- one token every 10 s, the first taken by the first attempt: the
    -- retry's comes long after the deadline of 5 s
    local SETS = { "--set", "rate.limit=0.1", "--set", "deadline=5" }
    local log = dir .. "/log"
    local run = proc.run(args({ "run", base(), srv.base .. "/503", "-q", "--log-json", log },
                              table.unpack(SETS)), { timeout = 30 })
    assert.are.equal(6, run.code, run.stderr)
    local sim = proc.run(args({ "simulate", base(), "--json" }, table.unpack(SETS)), { timeout = 30 })
    assert.are.equal(0, sim.code, sim.stderr)
    assert.are.same({ "1 rate_limit" }, verdicts(decisions(proc.readfile(log))))
    assert.are.same({ "1 rate_limit" }, verdicts(decisions(sim.stdout)))
    local chk = proc.run(args({ "check", base() }, table.unpack(SETS)), { timeout = 30 })
    assert.are.equal(0, chk.code, chk.stdout .. chk.stderr)
    local verdict, wait = row(chk.stdout, "503")
    assert.are.equal("rate_limit", verdict, chk.stdout)
    assert.are.equal("-", wait)
  end)

  it("a fixed rate spaces the retries: simulate waits for the token as run does", function ()
    local SETS = { "--set", "rate.limit=0.5", "--set", "max_attempts=2" }
    local log = dir .. "/log"
    local run = proc.run(args({ "run", base(), srv.base .. "/503", "-q", "--log-json", log },
                              table.unpack(SETS)), { timeout = 30 })
    assert.are.equal(4, run.code, run.stderr)
    local real = decisions(proc.readfile(log))
    local sim = proc.run(args({ "simulate", base(), "--json" }, table.unpack(SETS)), { timeout = 30 })
    assert.are.equal(0, sim.code, sim.stderr)
    local simulated = decisions(sim.stdout)
    assert.are.same(verdicts(real), verdicts(simulated))
    -- the token 2 s after the first attempt's, not the backoff's 0.05 s
    assert.are.equal("rate", real[1].wait_source)
    assert.are.equal("rate", simulated[1].wait_source)
    assert.is_true(math.abs(simulated[1].wait - 2) < 1e-6, "simulated wait " .. simulated[1].wait)
    local chk = proc.run(args({ "check", base() }, table.unpack(SETS)), { timeout = 30 })
    local verdict, wait = row(chk.stdout, "503")
    assert.are.equal("retry", verdict, chk.stdout)
    assert.are.equal("rate 2 s", wait)
  end)

  it("header pacing: each wait simulate shows holds the quota's slot, and the call lasts as long as run's", function ()
    local SETS = { "--set", "rate.headers=true", "--set", "throttle_backoff.initial=0.01",
                   "--set", "throttle_backoff.max=0.02", "--seed", "1" }
    local PROBE = '429 [RateLimit: "default";r=0;t=1]'
    local log = dir .. "/log"
    local run = proc.run(args({ "run", base(), srv.base .. "/rl0", "-q", "--log-json", log },
                              table.unpack(SETS)), { timeout = 30 })
    assert.are.equal(4, run.code, run.stderr)
    local real = folded(decisions(proc.readfile(log)))
    local sim = proc.run(args({ "simulate", base(), "--json", "--probe", PROBE }, table.unpack(SETS)),
                         { timeout = 30 })
    assert.are.equal(0, sim.code, sim.stderr)
    local simulated = decisions(sim.stdout)
    assert.are.same(verdicts(real), verdicts(simulated))
    -- no attempt before the server's quota comes back, 1 s after each answer
    for i = 1, 3 do
      assert.are.equal("rate", simulated[i].wait_source, "retry " .. i)
      assert.is_true(simulated[i].wait >= 1, "retry " .. i .. ": " .. simulated[i].wait)
      assert.is_true(real[i + 1].elapsed - real[i].elapsed >= 1, "run's attempt " .. i + 1)
      -- run's log says the slot's wait: once, and the waits add up to the gap
      assert.are.equal(1, real[i].added, "retry " .. i)
      assert.are.equal("rate", real[i].wait_source, "retry " .. i)
      -- the slot 1 s after the answer, less the backoff already waited
      -- and what a busy machine took since (0.997 s seen under ASan at
      -- load 6); the gap above is the slot's own bound
      assert.is_true(real[i].wait > 0.5, "run's wait " .. i .. ": " .. real[i].wait)
      assert.is_true(real[i].elapsed + real[i].wait <= real[i + 1].elapsed + 0.05,
                     "run's waits before attempt " .. i + 1)
    end
    -- and -v's lines, one for each
    local verbose = proc.run(args({ "run", base(), srv.base .. "/rl0", "-v" }, table.unpack(SETS)),
                             { timeout = 30 })
    local said = 0
    for n, secs in verbose.stderr:gmatch("before attempt (%d): waiting ([%d.]+) s more %(rate%)") do
      said = said + 1
      assert.are.equal(said + 1, tonumber(n))
      assert.is_true(tonumber(secs) > 0.5, "-v's wait before attempt " .. n .. ": " .. secs)
    end
    assert.are.equal(3, said, verbose.stderr)
    assert.is_true(simulated[4].elapsed >= 3, "simulated end " .. simulated[4].elapsed)
    assert.is_true(real[4].elapsed >= 3, "run's end " .. real[4].elapsed)
    local text = proc.run(args({ "simulate", base(), "--probe", PROBE }, table.unpack(SETS)),
                          { timeout = 30 })
    assert.matches("attempt 1: retry in 1%.%d+ s %(rate%)", text.stdout)
    local chk = proc.run(args({ "check", base(), "--probe", PROBE }, table.unpack(SETS, 1, 6)),
                         { timeout = 30 })
    local verdict, wait = row(chk.stdout, PROBE)
    assert.are.equal("retry", verdict, chk.stdout)
    local secs = tonumber(wait:match("^rate (%S+) s$"))
    assert.is_true(secs and secs >= 1, "check's wait: " .. tostring(wait))
  end)

  it("a slot past the deadline: simulate says before which attempt, as run does", function ()
    local SETS = { "--set", "rate.headers=true", "--set", "throttle_backoff.initial=0.01",
                   "--set", "throttle_backoff.max=0.02", "--set", "deadline=2.5", "--seed", "1" }
    local sim = proc.run(args({ "simulate", base(), "--probe", '429 [RateLimit: "default";r=0;t=1]' },
                              table.unpack(SETS)), { timeout = 30 })
    assert.are.equal(0, sim.code, sim.stderr)
    assert.matches("\nbefore attempt 4: rate_limit at [%d.]+ s %(rate%.headers%)\n$", sim.stdout)
  end)
end)
