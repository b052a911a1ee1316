-- Load-aware guards: throttling as its own class (is_throttling, its own
-- backoff and budget cost), attempt headers, the failure-rate and
-- slow-call breaker, client-side throttling and rate limiting.  Calls run
-- on the virtual clock with fixed seeds; the attempt headers are checked
-- against the fault server, which logs what it was sent.
local lr = require "luaretry"
local proc = require "spec.support.proc"

local function policy(src, name)
  local p, err = lr.load_string(src, name or "=load")
  assert(p, err)
  return p
end

-- A call that gets `statuses` in turn (the last one repeats) until it
-- stops; its decisions.
local function run_call(p, statuses, seed)
  local c = assert(p:begin { virtual = true, seed = seed or 1 })
  local ds = {}
  local first = c:next()
  if not first.retry then return { first } end
  for i = 1, 200 do
    local d = c:report { status = statuses[math.min(i, #statuses)] }
    ds[#ds + 1] = d
    if not d.retry then break end
    c:wait(d.wait)
    local n = c:next()
    if not n.retry then ds[#ds + 1] = n break end
  end
  return ds
end

describe("throttling as its own class", function ()
  local BASE = [[
max_attempts = 6
backoff = { initial = 0.05, multiplier = 2, max = 1, jitter = "none" }
]]

  it("a 429 is throttling by default: the throttling backoff (1 s doubling to 20 s, full jitter)", function ()
    local p = policy(BASE)
    local ds = run_call(p, { 429 })
    assert.are.equal(6, #ds)
    for i = 1, 5 do
      assert.is_true(ds[i].throttled)
      assert.are.equal("throttle", ds[i].source)
      -- full jitter: uniform in [0, min(1 * 2^n, 20)]
      assert.is_true(ds[i].wait >= 0 and ds[i].wait <= math.min(2 ^ (i - 1), 20))
    end
    -- a 503 is transient, not throttling: the policy's backoff
    ds = run_call(p, { 503 })
    assert.is_nil(ds[1].throttled)
    assert.are.equal("backoff", ds[1].source)
    assert.are.equal(0.05, ds[1].wait)
    assert.are.equal(0.1, ds[2].wait)
    assert.are.equal(6, p:metrics().throttled)   -- the last 429 too, though not retried
  end)

  it("throttle_backoff sets its own base, multiplier, cap and jitter", function ()
    local p = policy(BASE .. [[
throttle_backoff = { initial = 2, multiplier = 3, max = 10, jitter = "none" }
]])
    local ds = run_call(p, { 429 })
    local want = { 2, 6, 10, 10, 10 }
    for i = 1, 5 do assert.are.equal(want[i], ds[i].wait) end
    assert.are.equal("clamped", ds[3].source)
    -- a Retry-After still counts: never earlier than the server asked
    local c = assert(p:begin { virtual = true, seed = 1 })
    local d = c:report { status = 429, retry_after = 7 }
    assert.are.equal("server", d.source)
    assert.is_true(d.wait >= 7 and d.wait <= 8)
  end)

  it("is_throttling(status, body, info) classes a transient outcome; file and line on a bad result", function ()
    local p = policy(BASE .. [[
throttle_backoff = { initial = 3, jitter = "none" }
function is_transient(status) return status == 503 or status == 429 end
function is_throttling(status, body, info)
  return status == 503 and body:find("SlowDown", 1, true) ~= nil
end
]])
    local c = assert(p:begin { virtual = true, seed = 1 })
    local d = c:report { status = 503, body = "<Code>SlowDown</Code>" }
    assert.is_true(d.throttled)
    assert.are.equal(3, d.wait)
    d = c:report { status = 503, body = "oops" }
    assert.is_nil(d.throttled)
    assert.are.equal(0.1, d.wait)   -- retry 1 of the policy's backoff
    -- with is_throttling, a 429 is what the script says
    d = c:report { status = 429 }
    assert.is_nil(d.throttled)
    local bad = policy(BASE .. "function is_throttling() return 'yes' end\n", "@bad_throttle.lua")
    d = bad:begin { virtual = true, seed = 1 }:report { status = 503 }
    assert.are.equal("policy_error", d.verdict)
    assert.matches("bad_throttle.lua:3: is_throttling returned a string", d.message)
    -- not asked of an outcome that is not transient
    local never = policy(BASE .. "function is_throttling() error('asked') end\n")
    assert.are.equal("final", never:begin { virtual = true, seed = 1 }:report { status = 404 }.verdict)
    assert.are.equal("success", never:begin { virtual = true, seed = 1 }:report { status = 200 }.verdict)
  end)

  it("a throttling outcome takes budget.throttle_cost tokens (default 0.357, AWS's 5 for 14)", function ()
    local p = policy(BASE .. [[
max_attempts = 100
budget = { max_tokens = 10, token_ratio = 0.1 }
throttle_backoff = { initial = 0, jitter = "none" }
]])
    -- 10 tokens, retries while more than 5: 503s allow 4 retries, 429s 14
    local ds = run_call(p, { 429 })
    assert.are.equal("budget", ds[#ds].verdict)
    assert.are.equal(15, #ds)
    assert.is_true(math.abs(p:metrics().budget_tokens - (10 - 15 * 0.357)) < 1e-9)
    local q = policy(BASE .. [[
max_attempts = 100
budget = { max_tokens = 10, token_ratio = 0.1, throttle_cost = 1 }
throttle_backoff = { initial = 0, jitter = "none" }
]])
    ds = run_call(q, { 429 })
    assert.are.equal(5, #ds)
    assert.are.equal("budget", ds[#ds].verdict)
  end)

  it("the breaker takes throttling as a sign of life, not a failure", function ()
    local p = policy(BASE .. [[
max_attempts = 20
breaker = { failures = 3, open_seconds = 60 }
throttle_backoff = { initial = 0, jitter = "none" }
]])
    local ds = run_call(p, { 503, 503, 429, 503, 503, 429, 503, 503, 200 })
    assert.are.equal("success", ds[#ds].verdict)
    assert.are.equal("closed", p:metrics().breaker)
  end)

  it("rejects nonsense throttling settings at load with file and line", function ()
    local p, err = lr.load_string(BASE .. "throttle_backoff = { initial = -1, multiplier = 0.5, max = 0 }\n",
                                  "@tb.lua")
    assert.is_nil(p)
    assert.matches("tb.lua:3: throttle_backoff.initial", err)
    assert.matches("throttle_backoff.multiplier", err)
    assert.matches("throttle_backoff.max", err)
    p, err = lr.load_string(BASE .. "budget = { throttle_cost = 0/0 }\n", "@tc.lua")
    assert.is_nil(p)
    assert.matches("tc.lua:3: budget.throttle_cost", err)
    p, err = lr.load_string(BASE .. "throttle_backoff = { intial = 1 }\n", "@ty.lua")
    assert.truthy(p, err)
    local warned = false
    for _, w in ipairs(p:warnings()) do
      if w:find("throttle_backoff.intial: unknown name, did you mean throttle_backoff.initial?", 1, true) then warned = true end
    end
    assert.is_true(warned)
  end)
end)

describe("throttling against the fault server", function ()
  local srv, dir
  setup(function ()
    srv = proc.server(proc.root .. "/spec/load/server.lua")
    dir = proc.tmpdir()
  end)
  teardown(function ()
    if srv then srv:stop() end
    proc.rmtree(dir)
  end)

  it("a run logs a 429 as throttled and waits by throttle_backoff; a 503 by backoff", function ()
    local pol = dir .. "/t.lua"
    proc.writefile(pol, [[
max_attempts = 5
deadline = 30
attempt_timeout = 5
backoff = { initial = 0.05, jitter = "none" }
throttle_backoff = { initial = 0.2, multiplier = 1, jitter = "none" }
]])
    local function log_of(path)
      local r = proc.run({ "run", pol, srv.base .. path, "--log-json", dir .. "/log" }, { timeout = 60 })
      assert.are.equal(0, r.code, r.stderr)
      local lines = {}
      for _, l in ipairs(proc.lines(proc.readfile(dir .. "/log"))) do lines[#lines + 1] = proc.json.decode(l) end
      return lines, r
    end
    local lines, r = log_of("/throttle")
    assert.is_true(lines[1].throttled)
    assert.are.equal("throttle", lines[1].wait_source)
    assert.are.equal(0.2, lines[1].wait)
    assert.is_true(lines[2].throttled)
    assert.is_nil(lines[3].throttled)
    assert.is_true(r.secs >= 0.4)
    lines = log_of("/busy")
    assert.is_nil(lines[1].throttled)
    assert.are.equal("backoff", lines[1].wait_source)
    assert.are.equal(0.05, lines[1].wait)
  end)
end)

describe("attempt headers", function ()
  local srv, dir
  setup(function ()
    srv = proc.server(proc.root .. "/spec/load/server.lua")
    dir = proc.tmpdir()
  end)
  teardown(function ()
    if srv then srv:stop() end
    proc.rmtree(dir)
  end)
  before_each(function () srv:reset() end)

  local UUID4 = "^%x%x%x%x%x%x%x%x%-%x%x%x%x%-4%x%x%x%-[89ab]%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$"

  local function headers_seen(args)
    local r = proc.run(args, { timeout = 60 })
    assert.are.equal(0, r.code, r.stderr)
    local seen = {}
    for _, q in ipairs(srv:requests_on("/hdr")) do seen[#seen + 1] = q.headers end
    return seen
  end

  it("attempt_header numbers the attempts; info.invocation_id is one UUID v4 per call", function ()
    local pol = dir .. "/h.lua"
    proc.writefile(pol, [[
max_attempts = 5
deadline = 30
attempt_timeout = 5
backoff = { initial = 0.01, jitter = "none" }
attempt_header = "X-Attempt"
function prepare(request, attempt, info) request.headers["x-invocation"] = info.invocation_id end
]])
    local seen = headers_seen({ "run", pol, srv.base .. "/hdr", "-H", "X-Attempt: 99" })
    assert.are.equal(3, #seen)
    for i, h in ipairs(seen) do
      assert.are.equal(tostring(i), h["x-attempt"])   -- the caller's header replaced
      assert.matches(UUID4, h["x-invocation"])
      assert.are.equal(seen[1]["x-invocation"], h["x-invocation"])
    end
    srv:reset()
    local again = headers_seen({ "run", pol, srv.base .. "/hdr" })
    assert.are_not.equal(seen[1]["x-invocation"], again[1]["x-invocation"])   -- a new call, a new id
    -- a fixed seed: a fixed id, and the same waits as without an id
    srv:reset()
    local a = headers_seen({ "run", pol, srv.base .. "/hdr", "--seed", "7" })
    srv:reset()
    local b = headers_seen({ "run", pol, srv.base .. "/hdr", "--seed", "7" })
    assert.are.equal(a[1]["x-invocation"], b[1]["x-invocation"])
  end)

  it("gcs.lua sends x-goog-api-client's gccl-invocation-id and gccl-attempt-count, and the idempotency token", function ()
    local seen = headers_seen({ "run", proc.root .. "/policies/gcs.lua", srv.base .. "/hdr",
      "--set", "backoff.initial=0.01", "--set", "backoff.jitter=none",
      "-H", "x-goog-api-client: gl-python/3.12 gccl-attempt-count/9" })
    assert.are.equal(3, #seen)
    local id = seen[1]["x-goog-gcs-idempotency-token"]
    assert.matches(UUID4, id)
    for i, h in ipairs(seen) do
      assert.are.equal("gl-python/3.12 gccl-invocation-id/" .. id .. " gccl-attempt-count/" .. i,
                       h["x-goog-api-client"])
      assert.are.equal(id, h["x-goog-gcs-idempotency-token"])
    end
  end)

  it("the AWS example sends amz-sdk-invocation-id and amz-sdk-request", function ()
    local seen = headers_seen({ "run", proc.root .. "/policies/examples/aws-sdk.lua", srv.base .. "/hdr",
      "--set", "backoff.max=0.05" })
    assert.are.equal(3, #seen)
    for i, h in ipairs(seen) do
      assert.matches(UUID4, h["amz-sdk-invocation-id"])
      assert.are.equal(seen[1]["amz-sdk-invocation-id"], h["amz-sdk-invocation-id"])
      assert.are.equal("attempt=" .. i .. "; max=3", h["amz-sdk-request"])
    end
  end)

  it("rejects an attempt_header that is no header name, with file and line", function ()
    local p, err = lr.load_string("max_attempts = 2\nattempt_header = 'X Attempt:'\n", "@ah.lua")
    assert.is_nil(p)
    assert.matches("ah.lua:2: attempt_header: expected a header name", err)
  end)

  it("the module's call gives its invocation id; the seed fixes it", function ()
    local p = policy("max_attempts = 2\n")
    local a = p:begin { virtual = true, seed = 3 }:invocation_id()
    assert.matches(UUID4, a)
    assert.are.equal(a, p:begin { virtual = true, seed = 3 }:invocation_id())
    assert.are_not.equal(a, p:begin { virtual = true, seed = 4 }:invocation_id())
  end)
end)

describe("the AWS example's classes", function ()
  it("throttling codes in JSON and XML bodies, a 429; other 400s are final", function ()
    local p = assert(lr.load(proc.root .. "/policies/examples/aws-sdk.lua"))
    local function judge(status, body)
      return p:begin { virtual = true, seed = 1 }:report { status = status, body = body }
    end
    local d = judge(400, '{"__type":"com.amazon.coral.availability#ThrottlingException","message":"Rate exceeded"}')
    assert.are.equal("retry", d.verdict)
    assert.is_true(d.throttled)
    d = judge(503, "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>")
    assert.is_true(d.throttled)
    assert.is_true(judge(429, "").throttled)
    d = judge(503, "<Error><Code>ServiceUnavailable</Code></Error>")
    assert.are.equal("retry", d.verdict)
    assert.is_nil(d.throttled)
    assert.are.equal("final", judge(400, '{"__type":"ValidationException"}').verdict)
  end)
end)

describe("the failure-rate and slow-call breaker", function ()
  -- One attempt per call (max_attempts = 1): the outcomes go in one by one.
  local function one(p, status, secs)
    local c = assert(p:begin { virtual = true, seed = 1 })
    local n = c:next()
    if not n.retry then return n end
    if secs then c:wait(secs) end   -- the attempt lasts `secs` on the virtual clock
    return c:report { status = status }
  end

  -- 60% failures, never three in a row: F F S F S, F F S F S ...
  local PATTERN = { 503, 503, 200, 503, 200 }

  it("opens on a failure rate within min_calls outcomes; failures = 5 alone never does", function ()
    local rated = policy([[
max_attempts = 1
breaker = { failures = 5, failure_rate = 0.5, window = 20, min_calls = 10, open_seconds = 60 }
]])
    local opened_at
    for i = 1, 100 do
      local d = one(rated, PATTERN[(i - 1) % 5 + 1])
      if d.verdict == "circuit_open" then opened_at = i break end
    end
    assert.are.equal(11, opened_at)   -- the 10th outcome opened it: 6 of 10 failed
    assert.are.equal("open", rated:metrics().breaker)
    assert.are.equal(1, rated:metrics().breaker_openings)
    local d = one(rated, 200)
    assert.matches("or a failure or slow%-call rate over its window", d.message)

    local consecutive = policy([[
max_attempts = 1
breaker = { failures = 5, open_seconds = 60 }
]])
    for i = 1, 1000 do
      assert.are_not.equal("circuit_open", one(consecutive, PATTERN[(i - 1) % 5 + 1]).verdict)
    end
    assert.are.equal(0, consecutive:metrics().breaker_openings)
  end)

  it("waits for min_calls, and takes the rate over the last `window` outcomes only", function ()
    local p = policy([[
max_attempts = 1
breaker = { failures = 1000, failure_rate = 0.5, window = 10, min_calls = 4, open_seconds = 60 }
]])
    for _ = 1, 3 do assert.are.equal("exhausted", one(p, 503).verdict) end
    assert.are.equal("closed", p:metrics().breaker) -- 3 failures of 3: below min_calls
    local q = policy([[
max_attempts = 1
breaker = { failures = 1000, failure_rate = 0.5, window = 10, min_calls = 10, open_seconds = 60 }
]])
    -- 4 failures, then successes: 4 of 10 is below the rate, and the window slides
    for _ = 1, 4 do one(q, 503) end
    for _ = 1, 30 do one(q, 200) end
    for _ = 1, 4 do one(q, 503) end
    assert.are.equal("closed", q:metrics().breaker)
    one(q, 503)   -- 5 failures of the last 10
    assert.are.equal("open", q:metrics().breaker)
  end)

  it("throttling and final answers are not failures; slow attempts count as slow, whatever their answer", function ()
    local p = policy([[
max_attempts = 1
attempt_timeout = 10
breaker = { failures = 1000, failure_rate = 0.5, slow_call = { seconds = 2, rate = 0.5 },
            window = 10, min_calls = 10, open_seconds = 60 }
]])
    for _ = 1, 10 do one(p, 429) end
    for _ = 1, 10 do one(p, 404) end
    assert.are.equal("closed", p:metrics().breaker)
    for _ = 1, 6 do one(p, 200, 1.9) end   -- quick enough
    assert.are.equal("closed", p:metrics().breaker)
    for _ = 1, 4 do one(p, 200, 2) end     -- 4 slow of 10
    assert.are.equal("closed", p:metrics().breaker)
    one(p, 200, 5)                         -- 5 slow of the last 10
    assert.are.equal("open", p:metrics().breaker)
  end)

  it("half-open: probes (or half_open_calls) let calls through; a success closes it with a fresh window", function ()
    local p = policy([[
max_attempts = 1
breaker = { failures = 1000, failure_rate = 0.5, window = 4, open_seconds = 0.05, half_open_calls = 2 }
]])
    for _ = 1, 4 do one(p, 503) end
    assert.are.equal("open", p:metrics().breaker)
    assert.are.equal("circuit_open", one(p, 200).verdict)
    proc.sleep(0.2)  -- open_seconds is real time for the guards
    assert.are.equal("success", one(p, 200).verdict)
    assert.are.equal("closed", p:metrics().breaker)
    -- a fresh window: three failures of three is below min_calls (4)
    for _ = 1, 3 do one(p, 503) end
    assert.are.equal("closed", p:metrics().breaker)
  end)

  it("rejects nonsense at load with file and line", function ()
    local function err_of(src)
      local p, err = lr.load_string("max_attempts = 3\nattempt_timeout = 5\n" .. src, "@br.lua")
      assert.is_nil(p, "loaded: " .. src)
      return err
    end
    assert.matches("br.lua:3: breaker.failure_rate: expected", err_of("breaker = { failure_rate = 0 }\n"))
    assert.matches("br.lua:3: breaker.failure_rate: expected", err_of("breaker = { failure_rate = 0/0 }\n"))
    assert.matches("br.lua:3: breaker.failure_rate: expected", err_of("breaker = { failure_rate = 1.5 }\n"))
    assert.matches("br.lua:3: breaker.window: expected", err_of("breaker = { failure_rate = 0.5, window = 0 }\n"))
    assert.matches("br.lua:3: breaker.min_calls: 50 is above breaker.window %(20%)",
                   err_of("breaker = { failure_rate = 0.5, window = 20, min_calls = 50 }\n"))
    assert.matches("br.lua:3: breaker.slow_call.seconds: 6 s is above attempt_timeout %(5 s%)",
                   err_of("breaker = { slow_call = { seconds = 6, rate = 0.5 } }\n"))
    assert.matches("br.lua:3: breaker.slow_call.rate: needs breaker.slow_call.seconds",
                   err_of("breaker = { slow_call = { rate = 0.5 } }\n"))
    assert.matches("br.lua:3: breaker.slow_call.rate: expected",
                   err_of("breaker = { slow_call = { seconds = 1, rate = -1 } }\n"))
    assert.matches("br.lua:3: breaker.slow_call: expected a table",
                   err_of("breaker = { slow_call = 3 }\n"))
    assert.matches("set probes or half_open_calls, not both",
                   err_of("breaker = { probes = 1, half_open_calls = 2 }\n"))
    -- a typo inside slow_call is reported
    local p = assert(lr.load_string("max_attempts = 3\nbreaker = { slow_call = { second = 1 } }\n", "@ty.lua"))
    local found = false
    for _, w in ipairs(p:warnings()) do
      if w:find("breaker.slow_call.second: unknown name", 1, true) then found = true end
    end
    assert.is_true(found)
  end)
end)
