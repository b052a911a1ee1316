-- The overload guards every call of one policy shares in a process: the
-- retry budget (gRPC's retry throttling) and the circuit breaker, and the
-- counters.  Calls run on the virtual clock; the breaker's open period is
-- real time, so it is short here.
local lr = require "luaretry"
local proc = require "support.proc"

local function policy(src)
  local p, err = lr.load_string(src, "=guards")
  assert(p, err)
  return p
end

-- One call that fails with 503 until the policy stops it; its decisions.
local function failing_call(p, seed)
  local c = assert(p:begin { virtual = true, seed = seed or 1 })
  local first = c:next()
  if not first.retry then return first, 0 end
  local d, n
  for i = 1, 1000 do
    d = c:report { status = 503 }
    n = i
    if not d.retry then break end
    c:wait(d.wait)
  end
  return d, n
end

local function succeeding_call(p)
  local c = assert(p:begin { virtual = true, seed = 1 })
  return c:report { status = 200 }
end

describe("the retry budget", function ()
  local SRC = [[
max_attempts = 100
backoff = { initial = 0, jitter = "none" }
budget = { max_tokens = 10, token_ratio = 0.1 }
]]

  it("refuses the retry once half the tokens are spent, never a first attempt", function ()
    local p = policy(SRC)
    -- 10 tokens, -1 per failure, retries only while more than 5 are left
    local d, attempts = failing_call(p)
    assert.are.equal("budget", d.verdict)
    assert.are.equal(5, attempts)
    assert.matches("retry budget refuses", d.message)
    -- the next call still makes its first attempt, but no retry
    d, attempts = failing_call(p)
    assert.are.equal("budget", d.verdict)
    assert.are.equal(1, attempts)
    local m = p:metrics()
    assert.are.equal(2, m.budget_refusals)
    assert.are.equal(6, m.attempts)
    assert.are.equal(4, m.retries)
    assert.are.equal(4, m.budget_tokens)
  end)

  it("successes give back token_ratio each, and a retry needs more than half after the failure", function ()
    local p = policy(SRC)
    failing_call(p)
    failing_call(p)                      -- 4 tokens left
    for _ = 1, 20 do assert.are.equal("success", succeeding_call(p).verdict) end
    assert.is_true(math.abs(p:metrics().budget_tokens - 6.0) < 1e-9)
    local d, attempts = failing_call(p)  -- 6 - 1 = 5.0: not more than half
    assert.are.equal(1, attempts)
    assert.are.equal("budget", d.verdict)
    for _ = 1, 11 do succeeding_call(p) end  -- 5.0 + 1.1 = 6.1
    d, attempts = failing_call(p)        -- 5.1: one retry; then 4.1: refused
    assert.are.equal(2, attempts)
    assert.are.equal("budget", d.verdict)
    assert.is_true(math.abs(p:metrics().budget_tokens - 4.1) < 1e-9)
  end)

  it("is off unless the policy declares it, and --set can turn it on", function ()
    local p = policy("max_attempts = 20\nbackoff = { initial = 0, jitter = 'none' }")
    local d, attempts = failing_call(p)
    assert.are.equal("exhausted", d.verdict)
    assert.are.equal(20, attempts)
    assert.is_true(p:set("budget.max_tokens", "4"))
    d, attempts = failing_call(p)
    assert.are.equal("budget", d.verdict)
    assert.are.equal(2, attempts)        -- 4 -> 3 -> 2: not more than half
  end)

  it("simulate and probes use a budget of their own", function ()
    local p = policy(SRC)
    local schedule = p:schedule { attempts = 8 }
    assert.are.equal("budget", schedule[#schedule].verdict)
    p:classify { status = 503 }
    assert.are.equal(10, p:metrics().budget_tokens)
    assert.are.equal(0, p:metrics().calls)
  end)
end)

describe("the budget's floor (budget.reserve)", function ()
  local function floor_policy(initial, attempts)
    return policy(([[
max_attempts = %d
backoff = { initial = %g, multiplier = 1, jitter = "none" }
budget = { max_tokens = 10, token_ratio = 0.1, reserve = 0.1 }
]]):format(attempts or 100, initial))
  end

  it("lets a lone call of 10 attempts make them all, even with no wait between them", function ()
    -- 4 retries from the tokens, 5 from the reserve (50 s of 0.1 a second)
    local d, attempts = failing_call(floor_policy(0, 10))
    assert.are.equal("exhausted", d.verdict)
    assert.are.equal(10, attempts)
  end)

  it("holds 50 s of retries and refills at reserve per second, then refuses", function ()
    local d, attempts = failing_call(floor_policy(0))
    assert.are.equal("budget", d.verdict)
    assert.are.equal(10, attempts)   -- 4 + 5: the reserve's 50 s held at once
    assert.matches("and its reserve %(0.1 retries per second%) is spent", d.message)
    -- waits of 1 s: the 5 retries of the reserve in 5 s refill half of one
    d, attempts = failing_call(floor_policy(1))
    assert.are.same({ "budget", 10 }, { d.verdict, attempts })
    -- waits of 10 s: each retry's wait refills the one it takes
    d, attempts = failing_call(floor_policy(10, 30))
    assert.are.same({ "exhausted", 30 }, { d.verdict, attempts })
  end)

  it("is the policy's, not the call's: many calls in an outage share one reserve", function ()
    local p = floor_policy(0, 10)
    local sent = 0
    for seed = 1, 100 do
      local _, n = failing_call(p, seed)
      sent = sent + n
    end
    -- 100 first attempts, 4 retries from the tokens, 5 from the reserve
    -- (the virtual clocks of these calls do not move: no refill)
    assert.are.equal(109, sent)
  end)

  it("is off with reserve = 0, the default", function ()
    local d, attempts = failing_call(policy([[
max_attempts = 10
backoff = { initial = 0, jitter = "none" }
budget = { max_tokens = 10, token_ratio = 0.1 }
]]))
    assert.are.equal("budget", d.verdict)
    assert.are.equal(5, attempts)
  end)
end)

describe("the circuit breaker", function ()
  local SRC = [[
max_attempts = 10
backoff = { initial = 0, jitter = "none" }
breaker = { failures = 3, open_seconds = 0.2, probes = 1 }
]]

  it("opens after N transient failures in a row, then fails fast without an attempt", function ()
    local p = policy(SRC)
    local d, attempts = failing_call(p)
    assert.are.equal("circuit_open", d.verdict)
    assert.are.equal(3, attempts)
    assert.are.equal("open", p:metrics().breaker)
    assert.are.equal(1, p:metrics().breaker_openings)
    -- a call begun now is refused before any attempt
    local c = p:begin { virtual = true }
    local first = c:next()
    assert.is_false(first.retry)
    assert.are.equal("circuit_open", first.verdict)
    assert.are.equal(0, first.attempt)
    assert.is_nil(c:report { status = 200 })  -- nothing to report on
    local m = p:metrics()
    assert.are.equal(3, m.attempts)
    assert.are.equal(2, m.circuit_refusals)
  end)

  it("half-open lets K probes through: a success closes it, a failure opens it again", function ()
    local p = policy(SRC)
    failing_call(p)
    proc.sleep(0.25)                        -- the open period passes (real time)
    local probe = p:begin { virtual = true }
    assert.is_true(probe:next().retry)      -- the one probe
    assert.are.equal("half_open", p:metrics().breaker)
    local other = p:begin { virtual = true }
    assert.are.equal("circuit_open", other:next().verdict)  -- K = 1
    assert.are.equal("success", probe:report({ status = 200 }).verdict)
    assert.are.equal("closed", p:metrics().breaker)
    assert.is_true(p:begin({ virtual = true }):next().retry)

    failing_call(p)                         -- open again
    proc.sleep(0.25)
    local d, attempts = failing_call(p)     -- the probe fails: open at once
    assert.are.equal(1, attempts)
    assert.are.equal("circuit_open", d.verdict)
    assert.are.equal("open", p:metrics().breaker)
    assert.are.equal(3, p:metrics().breaker_openings)
  end)

  it("a probe answered with a final outcome closes it; a probe that never tells is replaced", function ()
    local p = policy(SRC)
    failing_call(p)
    proc.sleep(0.25)
    local probe = p:begin { virtual = true }
    assert.are.equal("final", probe:report({ status = 404 }).verdict)
    assert.are.equal("closed", p:metrics().breaker)   -- the service answered

    failing_call(p)
    proc.sleep(0.25)
    local silent = p:begin { virtual = true }          -- takes the one permit...
    assert.is_true(silent:next().retry)
    silent:cancel()                                    -- ...and never reports
    assert.are.equal("circuit_open", p:begin({ virtual = true }):next().verdict)
    proc.sleep(0.25)                                   -- another open period
    assert.is_true(p:begin({ virtual = true }):next().retry)
  end)

  it("a retry whose wait ends with the circuit open is not made", function ()
    local p = policy(SRC)
    local waiting = p:begin { virtual = true }
    assert.is_true(waiting:report({ status = 503 }).retry)  -- 1 in a row; it waits
    failing_call(p)                                          -- 2, 3: open
    local d = waiting:next()
    assert.is_false(d.retry)
    assert.are.equal("circuit_open", d.verdict)
    assert.matches("opened while the call waited", d.message)
  end)

  it("a success in between resets the count of failures in a row", function ()
    local p = policy(SRC)
    local c = p:begin { virtual = true }
    c:report { status = 503 }
    c:report { status = 503 }
    assert.are.equal("success", c:report({ status = 200 }).verdict)
    c = p:begin { virtual = true }
    c:report { status = 503 }
    assert.is_true(c:report({ status = 503 }).retry)  -- 2 in a row, not 4
    assert.are.equal("closed", p:metrics().breaker)
  end)
end)

describe("the counters", function ()
  it("count calls, attempts, retries, outcomes and the time waited", function ()
    local p = policy("max_attempts = 3\nbackoff = { initial = 1, jitter = 'none' }")
    failing_call(p)                               -- 3 attempts, waits 1 + 2
    succeeding_call(p)
    local c = p:begin { virtual = true }
    c:report { status = 404 }                     -- final
    local m = p:metrics()
    assert.are.equal(3, m.calls)
    assert.are.equal(5, m.attempts)
    assert.are.equal(2, m.retries)
    assert.are.equal(1, m.exhausted)
    assert.are.equal(1, m.successes)
    assert.are.equal(1, m.finals)
    assert.are.equal(3, m.time_waited)
    assert.are.equal("closed", m.breaker)
  end)
end)

describe("luaretry run and the guards", function ()
  local srv
  setup(function () srv = proc.server(proc.root .. "/spec/fixtures/run/server.lua") end)
  teardown(function () if srv then srv:stop() end end)
  before_each(function () srv:reset() end)

  it("a retry the budget refuses ends the run with exit 6, named as local", function ()
    local r = proc.run({ "run", proc.root .. "/spec/fixtures/guards/budget.lua", srv.base .. "/always503",
                         "--stats" }, { timeout = 30 })
    assert.are.equal(6, r.code, r.stderr)
    assert.matches("503 %-> budget %(budget%): the retry budget refuses", r.stderr)
    assert.are.equal(5, #srv:requests_on("/always503"))
    assert.matches("stats: calls 1, attempts 5, retries 4", r.stderr)
  end)

  it("an open circuit ends the run with exit 6 and no request after it opened", function ()
    local r = proc.run({ "run", proc.root .. "/spec/fixtures/guards/breaker.lua", srv.base .. "/always503" },
                       { timeout = 30 })
    assert.are.equal(6, r.code, r.stderr)
    assert.matches("circuit_open %(breaker%)", r.stderr)
    assert.matches("breaker: open", r.stderr)
    assert.are.equal(2, #srv:requests_on("/always503"))
  end)
end)

-- Settings of the guards that contradict each other do not load, naming
-- both fields; one that only becomes moot beside another is clamped with
-- a warning (luaretry-policy(5), ONE ATTEMPT, EVERY GUARD).
describe("the guards' settings beside each other", function ()
  it("refuses a breaker window below min_calls, naming both", function ()
    local p, err = lr.load_string("max_attempts = 3\nbreaker = { failure_rate = 0.5, window = 10, min_calls = 12 }\n",
                                  "@window.lua")
    assert.is_nil(p)
    assert.matches("breaker.min_calls", err)
    assert.matches("breaker.window", err)
    assert.matches("window.lua:2", err)
  end)

  it("refuses a hedging share above 1, naming it and its range", function ()
    local p, err = lr.load_string("max_attempts = 3\nhedge = { delay = 0.1, share = 1.5 }\n", "@share.lua")
    assert.is_nil(p)
    assert.matches("hedge.share", err)
    assert.matches("share.lua:2", err)
  end)

  it("clamps a hedge.max at or above max_attempts, with a warning naming both", function ()
    local p = policy("max_attempts = 3\nattempt_timeout = 1\nhedge = { delay = 0.1, max = 5 }\n")
    local w = table.concat(p:warnings(), "\n")
    assert.matches("hedge.max", w)
    assert.matches("moot beside max_attempts %(3%)", w)
    assert.matches("clamped to 2", w)
    -- --set max_attempts=1 makes any hedge moot: none then
    p:set("max_attempts", "1")
    w = table.concat(p:warnings(), "\n")
    assert.matches("clamped to 0", w)
  end)
end)
