-- Load-aware guards: throttling as its own class (is_throttling, its own
-- backoff and budget cost), attempt headers, the failure-rate and
-- slow-call breaker, client-side throttling and rate limiting.  Calls run
-- on the virtual clock with fixed seeds; the attempt headers are checked
-- against the fault server, which logs what it was sent.
local lr = require "luaretry"
local proc = require "support.proc"

local SERVER = proc.root .. "/spec/fixtures/load/server.lua"

local function policy(src, name)
  local p, err = lr.load_string(src, name or "=load")
  assert(p, err)
  return p
end

-- `luaretry ARGS... --log-json LOG`: its result, with r.log the log's
-- text and r.lines its lines decoded (the attempts, then the summary).
local function run_logged(args, log, timeout)
  local all = { table.unpack(args) }
  all[#all + 1], all[#all + 2] = "--log-json", log
  os.remove(log)
  local r = proc.run(all, { timeout = timeout or 60 })
  r.log = proc.readfile(log) or ""
  r.lines = {}
  for _, l in ipairs(proc.lines(r.log)) do r.lines[#r.lines + 1] = proc.json.decode(l) end
  return r
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

  it("the breaker takes throttling as neutral: neither a failure nor a reset", function ()
    local src = BASE .. [[
max_attempts = 20
breaker = { failures = 3, open_seconds = 60 }
throttle_backoff = { initial = 0, jitter = "none" }
]]
    local p = policy(src)
    local ds = run_call(p, { 429, 429, 429, 429, 429, 429, 200 })
    assert.are.equal("success", ds[#ds].verdict)
    assert.are.equal("closed", p:metrics().breaker)
    -- a 429 between failures does not reset their count: the third opens it
    p = policy(src)
    ds = run_call(p, { 503, 503, 429, 503, 200 })
    assert.are.equal("circuit_open", ds[#ds].verdict)
    assert.are.equal(4, #ds)
    assert.are.equal("open", p:metrics().breaker)
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
  proc.with_server(SERVER, function (s, t) srv, dir = s, t end)

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
      local r = run_logged({ "run", pol, srv.base .. path }, dir .. "/log")
      assert.are.equal(0, r.code, r.stderr)
      return r.lines, r
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
  proc.with_server(SERVER, function (s, t) srv, dir = s, t end)

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

  it("rejects a header name or fleet key longer than 63 bytes or holding a NUL, never cut", function ()
    local long = "X-" .. string.rep("a", 62)
    local p, err = lr.load_string("max_attempts = 2\nattempt_header = '" .. long .. "'\n", "@ah.lua")
    assert.is_nil(p)
    assert.matches("ah.lua:2: attempt_header: expected at most 63 bytes, got 64", err, 1, true)
    p, err = lr.load_string("max_attempts = 2\npropagate = { retries = 'X-R\\0etries' }\n", "@pr.lua")
    assert.is_nil(p)
    assert.matches("pr.lua:2: propagate.retries: expected a string without a NUL byte", err, 1, true)
    p, err = lr.load_string("max_attempts = 2\nfleet = { key = '" .. string.rep("k", 64) .. "' }\n", "@fk.lua")
    assert.is_nil(p)
    assert.matches("fk.lua:2: fleet.key: expected at most 63 bytes, got 64", err, 1, true)
    -- what the script wrote is quoted with its control bytes escaped: one line, nothing
    -- for the terminal to run
    p, err = lr.load_string("max_attempts = 2\nattempt_header = 'X\\r\\nY\\27[2J'\n", "@cr.lua")
    assert.is_nil(p)
    assert.matches('cr.lua:2: attempt_header: expected a header name (letters, digits and ' ..
                   '!#$%&\'*+-.^_`|~), got "X\\x0d\\x0aY\\x1b[2J"', err, 1, true)
    p = assert(lr.load_string("max_attempts = 2\n", "=p"))
    local ok
    ok, err = p:set("attempt_header", long)
    assert.is_nil(ok)
    assert.matches("attempt_header: expected at most 63 bytes, got 64", err, 1, true)
    -- 63 bytes is a header name as it is; the policy's own name is abbreviated, as before
    assert(p:set("attempt_header", long:sub(1, 63)))
    p = assert(lr.load_string("max_attempts = 2\nname = '" .. string.rep("n", 80) .. "'\n", "=p"))
    assert.matches("^" .. string.rep("n", 46) .. "~" .. string.rep("%x", 16) .. "$", p:tuning().name)
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

  it("half-open: probes let calls through; a success closes it with a fresh window", function ()
    local p = policy([[
max_attempts = 1
breaker = { failures = 1000, failure_rate = 0.5, window = 4, open_seconds = 0.05, probes = 2 }
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
    -- a typo inside slow_call is reported
    local p = assert(lr.load_string("max_attempts = 3\nbreaker = { slow_call = { second = 1 } }\n", "@ty.lua"))
    local found = false
    for _, w in ipairs(p:warnings()) do
      if w:find("breaker.slow_call.second: unknown name", 1, true) then found = true end
    end
    assert.is_true(found)
  end)
end)

describe("admission control (admission = { k, window }: the SRE book's client-side throttling)", function ()
  local function one(p, status, seed)
    local c = assert(p:begin { virtual = true, seed = seed })
    local n = c:next()
    if not n.retry then return n end
    return c:report { status = status }
  end

  it("never refuses while the service accepts; refuses most first attempts once it does not", function ()
    local p = policy("max_attempts = 1\nadmission = { k = 2, window = 60 }\n")
    for i = 1, 300 do assert.are.equal("success", one(p, 200, i).verdict) end
    assert.are.equal(0, p:metrics().admission_refusals)
    local q = policy("max_attempts = 1\nadmission = { k = 2, window = 60 }\n")
    local reached = 0
    for i = 1, 1000 do
      local d = one(q, 503, i)
      if d.verdict ~= "admission" then reached = reached + 1 end
    end
    -- with no accepts the refusal is n / (n + 1): about ln(1000) attempts get through
    assert.is_true(reached >= 2 and reached <= 30, "reached " .. reached)
    assert.are.equal(1000 - reached, q:metrics().admission_refusals)
    local d = one(q, 503, 5000)
    assert.are.equal("admission", d.verdict)
    assert.matches("^admission control refuses %(it refuses 100%% of attempts now", d.message)
  end)

  it("K sets how many failures it tolerates: a 60% failing service is let through at K = 3, not at K = 1.5", function ()
    local function reached(k)
      local p = policy("max_attempts = 1\nadmission = { k = " .. k .. ", window = 60 }\n")
      local n = 0
      for i = 1, 1000 do
        local d = one(p, (i % 5 < 3) and 503 or 200, i)
        if d.verdict ~= "admission" then n = n + 1 end
      end
      return n
    end
    -- 40% accepted: K * 0.4 = 1.2 at K = 3, above 1: no refusal once accepts
    -- come; 0.6 at K = 1.5: the refusal p = 1 - 0.6 (1 - p) tends to 1
    local n3, n15 = reached(3), reached(1.5)
    assert.is_true(n3 >= 950, "K = 3 reached " .. n3)
    assert.is_true(n15 <= 300, "K = 1.5 reached " .. n15)
  end)

  it("retries count too, and a refused retry stops the call with verdict admission (exit 6's class)", function ()
    local p = policy("max_attempts = 50\nbackoff = { initial = 0, jitter = 'none' }\nadmission = { k = 2, window = 60 }\n")
    local c = assert(p:begin { virtual = true, seed = 1 })
    local d
    for _ = 1, 50 do
      d = c:report { status = 503 }
      if not d.retry then break end
    end
    assert.are.equal("admission", d.verdict)
    assert.is_true(d.attempt < 50)
  end)

  it("forgets what is older than its window", function ()
    local p = policy("max_attempts = 1\nadmission = { k = 2, window = 0.2 }\n")
    for i = 1, 50 do one(p, 503, i) end
    assert.are.equal("admission", one(p, 503, 999).verdict)
    proc.sleep(0.5)   -- the guards' clock is real time plus the calls' virtual waits
    assert.are.equal("success", one(p, 200, 1000).verdict)
  end)

  it("the old names still load until 1.0, each with a warning naming the new one", function ()
    local dir = proc.tmpdir()
    finally(function () proc.rmtree(dir) end)
    local function check(src, ...)
      proc.writefile(dir .. "/old.lua", src)
      local r = proc.run({ "check", dir .. "/old.lua", ... }, { timeout = 30 })
      return r.stdout .. r.stderr
    end
    local out = check([[
max_attempts = 3
throttle = { k = 3, window = 60 }
breaker = { failures = 5, half_open_calls = 2 }
]])
    for _, want in ipairs { "old.lua:2: throttle: renamed admission (the old name is read until 1.0)",
                            "old.lua:3: breaker.half_open_calls: renamed breaker.probes",
                            "admission.k=3 admission.window=60", "breaker.probes=2" } do
      assert.truthy(out:find(want, 1, true), want .. " in " .. out)
    end
    assert.is_nil(out:find("unknown name", 1, true), out)
    -- the old name of an override too
    out = check("max_attempts = 3\nadmission = { k = 2 }\n", "--set", "throttle.k=4")
    assert.truthy(out:find("--set throttle.k: renamed admission.k", 1, true), out)
    assert.truthy(out:find("admission.k=4", 1, true), out)
    -- both set: the new one wins, and the warning says so
    out = check("max_attempts = 3\nadmission = { k = 2 }\nthrottle = { k = 9 }\n")
    assert.truthy(out:find("admission.k=2", 1, true), out)
    assert.truthy(out:find("old.lua:3: throttle: renamed admission (the old name is read until 1.0); " ..
                           "admission is set too: throttle is ignored", 1, true), out)
  end)

  it("every rename the loader reads is listed in CHANGELOG's Upgrading, old -> new", function ()
    -- the loader's table (core/policy/schema.c), read as written
    local src = proc.readfile(proc.root .. "/core/policy/schema.c")
    local table_src = src:match("renamed%[%] = {(.-)\n};")
    assert.truthy(table_src, "schema.c's renamed[] table")
    local log = proc.readfile(proc.root .. "/CHANGELOG.md")
    local upgrading = log:match("\n### Upgrading\n(.-)\n### ")
    assert.truthy(upgrading, "CHANGELOG.md's Upgrading section")
    upgrading = upgrading:gsub("%s+", " ")
    local n = 0
    for old, now in table_src:gmatch('{ "([^"]+)", "([^"]+)" }') do
      n = n + 1
      -- each name whole: not a longer name's tail (`options.retry_all_errors`)
      local function named(name)
        local pat = "%f[%w._]" .. name:gsub("%p", "%%%0") .. "%f[^%w_]"
        return upgrading:find(pat) ~= nil
      end
      assert.is_true(named(old), old .. " in Upgrading")
      assert.is_true(named(now), now .. " in Upgrading")
    end
    assert.is_true(n >= 5, "renames read from schema.c: " .. n)
  end)

  it("rejects K <= 1, a window of 0 and NaN at load with file and line", function ()
    for _, src in ipairs { "admission = { k = 1 }", "admission = { k = 0.5 }", "admission = { k = 0/0 }",
                           "admission = { window = 0 }", "admission = { window = -1 }" } do
      local p, err = lr.load_string("max_attempts = 2\n" .. src .. "\n", "@th.lua")
      assert.is_nil(p, src)
      assert.matches("th.lua:2: admission%.", err)
    end
  end)
end)

describe("the rate limiter (rate = { limit, burst } or { adaptive = true })", function ()
  it("paces first attempts: c:next() says how long to wait for the token", function ()
    local p = policy("max_attempts = 3\nrate = { limit = 10 }\n")
    local waits = {}
    for i = 1, 5 do
      local c = assert(p:begin { virtual = true, seed = i })
      local n = c:next()
      assert.is_true(n.retry)
      waits[i] = n.wait
      if i > 1 then assert.are.equal("rate", n.source) end
    end
    for i = 1, 5 do
      -- the k-th call's token comes (k - 1) / 10 s after the first's; real time
      -- passes between the calls too (at most a second here, on a busy machine)
      assert.is_true(waits[i] <= (i - 1) * 0.1 + 1e-9 and waits[i] >= (i - 1) * 0.1 - 1,
                     "wait " .. i .. ": " .. waits[i])
    end
    assert.are.equal(10, p:metrics().rate)
  end)

  it("burst lets that many go at once; a token past the deadline ends the call with verdict rate_limit", function ()
    local p = policy("max_attempts = 3\ndeadline = 0.35\nrate = { limit = 10, burst = 3 }\n")
    local verdicts = {}
    for i = 1, 8 do
      local c = assert(p:begin { virtual = true, seed = i })
      local n = c:next()
      verdicts[i] = n.retry and (n.wait > 0 and "wait" or "now") or n.verdict
      if not n.retry then assert.matches("the rate limiter's next token", n.message) end
    end
    assert.are.same({ "now", "now", "now" }, { verdicts[1], verdicts[2], verdicts[3] })
    assert.are.equal("rate_limit", verdicts[8])
    assert.is_true(p:metrics().rate_limited >= 1)
  end)

  it("a retry waits for its token after the backoff, within the deadline", function ()
    local p = policy("max_attempts = 5\nbackoff = { initial = 0.01, jitter = 'none' }\nrate = { limit = 2 }\n")
    local c = assert(p:begin { virtual = true, seed = 1 })
    assert.are.equal(0, c:next().wait)
    local d = c:report { status = 503 }
    assert.are.equal("rate", d.source)
    assert.is_true(d.wait > 0.4 and d.wait <= 0.5 + 1e-9, "wait " .. d.wait)
    c:wait(d.wait)
    assert.are.equal(0, c:next().wait)   -- the token was reserved with the decision
  end)

  it("adaptive: unlimited until a throttling answer, then x0.7 of what the service took, a slow start until the next, then up with successes", function ()
    local p = policy("max_attempts = 1\nrate = { adaptive = true }\n")
    local function call(status)
      local c = assert(p:begin { virtual = true, seed = 1 })
      local n = c:next()
      local d = c:report { status = status }
      return n, d
    end
    for _ = 1, 20 do assert.are.equal(0, (call(200)).wait) end
    assert.are.equal(0, p:metrics().rate)
    call(429)
    local r = p:metrics().rate
    assert.is_true(r > 0 and r <= 20 * 0.7 + 1e-9, "rate " .. r)   -- 20 successes within the last second
    -- the slow start ends at a throttling answer to an attempt sent during
    -- it, however soon: 0.9 of 0.6 of the rate at least, never more
    call(429)
    local r2 = p:metrics().rate
    assert.is_true(r2 < r and r2 >= 0.9 * 0.6 * r - 1e-9, ("rate %g after %g"):format(r2, r))
    r = r2
    call(429)                                  -- within a second of the last decrease: no change
    assert.are.equal(r, p:metrics().rate)
    local n = call(200)
    assert.is_true(n.wait > 0)                 -- paced now
    assert.is_true(p:metrics().rate > r)       -- a success raised it
  end)

  it("adaptive: with no success, the first throttling answer takes 0.7 of the attempts sent over the last second (each counted while it does not pace)", function ()
    local p = policy("max_attempts = 1\nrate = { adaptive = true }\n")
    for i = 1, 19 do
      local c = assert(p:begin { virtual = true, seed = i })
      assert.are.equal(0, c:next().wait)
      assert.are.equal("exhausted", c:report { status = 503 }.verdict)
    end
    assert.are.equal(0, p:metrics().rate)
    local c = assert(p:begin { virtual = true, seed = 20 })
    assert.are.equal(0, c:next().wait)
    c:report { status = 429 }
    -- 20 sent within the last second (each call's guard clock starts at
    -- its real start), none succeeded: 14 a second; none counted: 4
    local r = p:metrics().rate
    assert.is_true(r > 4 + 1e-9 and r <= 20 * 0.7 + 1e-9, "rate " .. r)
  end)

  it("a tiny rate gives huge waits, never an overflow (UBSan watches the sanitized run)", function ()
    local p = policy("max_attempts = 3\nrate = { limit = 1e-300 }\n")
    local c = assert(p:begin { virtual = true, seed = 1 })
    assert.are.equal(0, c:next().wait)
    local c2 = assert(p:begin { virtual = true, seed = 2 })
    local n = c2:next()
    assert.is_true(n.retry and n.wait > 9e299 and n.wait < 1.1e300)
    -- the throttle's and the limiter's buckets 1e300 s in are clamped
    local q = policy("max_attempts = 3\nadmission = { k = 2 }\nrate = { adaptive = true }\n")
    local c3 = assert(q:begin { virtual = true, seed = 1 })
    c3:wait(1e300)
    assert.are.equal("retry", c3:report { status = 429 }.verdict)
  end)

  it("rejects rates <= 0 or NaN, a burst of 0, and a rate table with neither limit nor adaptive", function ()
    for _, src in ipairs { "rate = { limit = 0 }", "rate = { limit = -5 }", "rate = { limit = 0/0 }",
                           "rate = { limit = 10, burst = 0 }", "rate = { burst = 3 }" } do
      local p, err = lr.load_string("max_attempts = 2\n" .. src .. "\n", "@rl.lua")
      assert.is_nil(p, src)
      assert.matches("rl.lua:2: rate", err)
    end
  end)
end)

describe("pacing against the fault server", function ()
  local srv, dir
  proc.with_server(SERVER, function (s, t) srv, dir = s, t end)

  local function urls(n, path)
    local t = {}
    for i = 1, n do t[i] = srv.base .. path .. "?i=" .. i end
    proc.writefile(dir .. "/urls", table.concat(t, "\n") .. "\n")
    return dir .. "/urls"
  end

  it("a batch at --parallel-max 8 sends at most `limit` a second after the burst", function ()
    local pol = dir .. "/r.lua"
    proc.writefile(pol, "max_attempts = 3\ndeadline = 60\nattempt_timeout = 10\nrate = { limit = 20, burst = 2 }\n")
    local n = 60
    local r = proc.run({ "run", pol, "--urls", urls(n, "/ok"), "--parallel-max", "8", "-s", "--output-dir", dir },
                       { timeout = 120 })
    assert.are.equal(0, r.code, r.stderr)
    local times = {}
    for _, q in ipairs(srv:requests_on("/ok")) do times[#times + 1] = q.time end
    assert.are.equal(n, #times)
    table.sort(times)
    -- 2 at once, then one each 50 ms: the last token comes 2.9 s after the
    -- first.  The server stamps each request when it reads it, some time
    -- after its token: a connection to open, and on a busy machine a
    -- client or a server descheduled, then reading several at once (24
    -- within a second at --parallel-max 8 beside two busy loops, final27,
    -- against limit + burst = 22).  So each stretch is allowed SLACK s of
    -- such bunching on top of its own length: far below what an unpaced
    -- batch (all 60 within milliseconds) or a doubled limit (42 a second)
    -- would show.
    local SLACK = 0.5
    assert.is_true(times[n] - times[1] >= (n - 2) / 20 - SLACK, "span " .. (times[n] - times[1]))
    for i = 1, n do
      local k = 0
      for j = i, n do if times[j] - times[i] < 1 then k = k + 1 end end
      assert.is_true(k <= 2 + 20 * (1 + SLACK), "requests within a second: " .. k)
    end
  end)

  it("a token past the deadline ends the call at once: verdict rate_limit, exit 6, no request", function ()
    local pol = dir .. "/late.lua"
    proc.writefile(pol, "max_attempts = 3\ndeadline = 2\nattempt_timeout = 1\nrate = { limit = 0.2 }\n")
    local r = run_logged({ "run", pol, "--urls", urls(2, "/ok") }, dir .. "/log")
    assert.are.equal(6, r.code, r.stderr)
    -- at once on the engine's own clock (the decision's elapsed, from its
    -- call's start: a busy machine's start-up is not in it), not at the
    -- deadline (2 s); nor did the batch hold the call for the token (5 s)
    local stops = 0
    for _, l in ipairs(r.lines) do
      if l.verdict == "rate_limit" and not l.summary then
        stops = stops + 1
        assert.is_true(l.elapsed < 1, "it waited for the token: decided at " .. l.elapsed .. " s")
      end
    end
    assert.are.equal(1, stops, r.log)
    assert.is_true(r.secs < 4.5, "it waited for the token: " .. r.secs)
    assert.are.equal(1, #srv:requests_on("/ok"))
    assert.matches('"verdict":"rate_limit"', r.log)
  end)

  it("a service failing 60% of calls: the failure-rate breaker opens after min_calls; failures = 5 alone never", function ()
    local function run(breaker)
      srv:reset()
      local pol = dir .. "/b.lua"
      proc.writefile(pol, "max_attempts = 1\ndeadline = 30\nattempt_timeout = 5\nbreaker = " .. breaker .. "\n")
      local r = run_logged({ "run", pol, "--urls", urls(40, "/sixty") }, dir .. "/log", 120)
      return r, #srv:requests_on("/sixty")
    end
    local r, seen = run("{ failures = 5, failure_rate = 0.5, window = 20, min_calls = 10, open_seconds = 60 }")
    assert.are.equal(6, r.code, r.stderr)
    assert.are.equal(10, seen)    -- 6 of the first 10 failed: open; the other 30 never sent
    r, seen = run("{ failures = 5, open_seconds = 60 }")
    assert.are.equal(4, r.code, r.stderr)   -- exhausted (max_attempts = 1), never circuit_open
    assert.are.equal(40, seen)
    assert.is_nil(r.log:find('"circuit_open"', 1, true))
  end)

  it("admission control keeps an always-503 service from most first attempts; exit 6, verdict admission", function ()
    local pol = dir .. "/t.lua"
    proc.writefile(pol, "max_attempts = 1\ndeadline = 60\nattempt_timeout = 10\nadmission = { k = 2, window = 60 }\n")
    local r = run_logged({ "run", pol, "--urls", urls(200, "/down"), "--parallel-max", "4", "--seed", "1",
                           "--stats", "--metrics-file", dir .. "/metrics" }, dir .. "/log", 120)
    assert.are.equal(6, r.code, r.stderr)
    local seen = #srv:requests_on("/down")
    assert.is_true(seen >= 2 and seen <= 40, "requests that reached the service: " .. seen)
    assert.matches('"verdict":"admission"', r.log)
    -- the counter under its name: 200 calls, each refused or sent once
    local refused = 200 - seen
    assert.matches("admission refusals " .. refused .. "[,\n]", r.stderr)
    assert.matches("luaretry_admission_refusals_total%S* " .. refused .. "\n", proc.readfile(dir .. "/metrics"))
  end)
end)

describe("simulate shows each guard (--process, --status)", function ()
  local HTTP = proc.root .. "/policies/http.lua"
  local function sim(args)
    local all = { "simulate", HTTP, "--clients", "100", "--process", "--json" }
    for _, a in ipairs(args) do all[#all + 1] = a end
    local r = proc.run(all, { timeout = 120 })
    assert.are.equal(0, r.code, r.stderr)
    return proc.json.decode(r.stdout).process
  end

  it("admission control keeps a burst of 100 calls against an outage to a few requests", function ()
    -- http.lua without its own guards (budget, adaptive rate): the one asked alone
    local plain = sim { "--outage", "60", "--set", "budget=none", "--set", "rate=none" }
    assert.is_true(plain.attempts >= 300, "without: " .. plain.attempts)
    local throttled = sim { "--outage", "60", "--set", "admission.k=2", "--set", "budget=none",
                            "--set", "rate=none" }
    assert.is_true(throttled.attempts <= 20, "with: " .. throttled.attempts)
    assert.are.equal(100, throttled.stops.admission)
  end)

  it("the rate limiter spreads first attempts: 100 at 10 a second take 9.9 s", function ()
    local r = sim { "--outage", "5", "--set", "rate.limit=10", "--set", "rate.adaptive=false",
                    "--set", "budget=none" }
    assert.is_true(r.last_attempt >= 9.9 - 1e-6, "last " .. r.last_attempt)
    assert.are.equal(100, r.stops.success)
    local free = sim { "--outage", "5", "--set", "rate=none" }
    assert.is_true(free.last_attempt < r.last_attempt)
  end)

  it("--status 429 makes the outage's answers throttling: the throttling backoff and budget cost apply", function ()
    local a = sim { "--outage", "20", "--status", "429", "--set", "budget.max_tokens=10",
                    "--set", "budget.throttle_cost=0" }
    local b = sim { "--outage", "20", "--set", "budget.max_tokens=10", "--set", "budget.throttle_cost=0" }
    -- throttling costs nothing here: no budget refusal; 503s spend the budget
    assert.is_nil(a.stops.budget)
    assert.is_true((b.stops.budget or 0) > 0)
  end)

  it("refuses --status outside 100-599, and --process with --fleet or without --clients", function ()
    for _, args in ipairs {
      { "simulate", HTTP, "--clients", "5", "--status", "99" },
      { "simulate", HTTP, "--process" },
      { "simulate", HTTP, "--clients", "5", "--process", "--fleet" },
      { "simulate", HTTP, "--status", "429" },
    } do
      local r = proc.run(args, { timeout = 60 })
      assert.are.equal(2, r.code, table.concat(args, " "))
    end
  end)
end)
