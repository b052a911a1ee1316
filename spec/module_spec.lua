-- The Lua module itself: loading, tuning, the step API, p:run, and the
-- shipped policies/http.lua.
local lr = require "luaretry"

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local FIX = here .. "fixtures/"
local HTTP = here .. "../policies/http.lua"

local function has(haystack, needle)
  assert.is_string(haystack)
  assert.is_truthy(haystack:find(needle, 1, true),
    ("expected to find %q in:\n%s"):format(needle, haystack))
end

describe("loading", function()
  it("exposes load, load_string and the version", function()
    assert.is_function(lr.load)
    assert.is_function(lr.load_string)
    assert.is_truthy(lr.version:match("^%d+%.%d+%.%d+$"))
  end)

  it("loads with and without a chunk name and options", function()
    assert.is_userdata(lr.load_string("max_attempts = 2"))
    assert.is_userdata(lr.load_string("max_attempts = 2", "=named"))
    assert.is_userdata(lr.load_string("max_attempts = 2", "=named", {}))
    assert.is_userdata(lr.load(FIX .. "reload_v1.lua"))
    local p = assert(lr.load(FIX .. "reload_v1.lua", { set = { max_attempts = 6 } }))
    assert.are.equal(6, p:tuning().max_attempts)
  end)

  it("refuses an option it would ignore: a policy field beside set, an unknown name", function()
    local ok, err = pcall(lr.load, FIX .. "reload_v1.lua", { max_attempts = 1 })
    assert.is_false(ok)
    assert.matches("max_attempts is a policy field: put it in set = ", err, 1, true)
    ok, err = pcall(lr.load_string, "max_attempts = 2", "=x", { bogus = true })
    assert.is_false(ok)
    assert.matches("unknown option 'bogus'", err, 1, true)
    ok, err = pcall(lr.load_string, "max_attempts = 2", "=x", { [1] = "x" })
    assert.is_false(ok)
    assert.matches("a number key", err, 1, true)
    -- set that is no table was ignored, its overrides lost
    for _, set in ipairs{ "max_attempts=7", 5, true } do
      ok, err = pcall(lr.load_string, "max_attempts = 2", "=x", { set = set })
      assert.is_false(ok)
      assert.matches("opts.set: expected a table of NAME = value, got " .. type(set), err, 1, true)
    end
    ok, err = pcall(lr.load_string, "max_attempts = 2", "=x", { set = { [true] = 1 } })
    assert.is_false(ok)
    assert.matches("opts.set: a boolean key (setting names expected)", err, 1, true)
    -- host-only fields and log stay at the top
    local p = assert(lr.load_string("max_attempts = 2", "=x",
                                    { time_limit = 1, log = function() end }))
    assert.are.equal(1, p:tuning().time_limit)
  end)

  it("names the chunk \"policy\" by default", function()
    local p = assert(lr.load_string("max_attempts = 2\nfunction is_transient() return true end"))
    assert.are.equal("policy:2", p:classify{ status = 503 }.rule)
  end)

  it("fails on a missing file with the path and an error name", function()
    local p, msg, name = lr.load(FIX .. "no_such_policy.lua")
    assert.is_nil(p)
    has(msg, "no_such_policy.lua")
    has(msg, "cannot open")
    assert.are.equal("policy file cannot be read", name)
  end)

  it("fails on a syntax error with the line", function()
    local p, msg, name = lr.load_string("max_attempts = = 1", "@broken.lua")
    assert.is_nil(p)
    has(msg, "broken.lua:1:")
    assert.are.equal("policy script does not compile", name)
  end)

  it("reports defaults in p:tuning()", function()
    local p = assert(lr.load(FIX .. "reload_v1.lua"))
    local t = p:tuning()
    assert.are.equal("v1", t.name)
    has(t.source, "reload_v1.lua")
    assert.is_nil(t.deadline)
    assert.is_nil(t.attempt_timeout)
    assert.is_true(t.retry_after)
    assert.are.equal(300, t.max_retry_after)
    assert.are.equal(65536, t.body_limit)
    assert.are.equal(0, t.instruction_limit)   -- not counted: the time limit instead
    assert.are.equal(0.25, t.time_limit)
    assert.are.equal(8388608, t.memory_limit)
    local q = assert(lr.load_string("deadline = 9", "@dir/my_service.lua")):tuning()
    assert.are.equal("my_service", q.name)
    assert.are.same({ kind = "exponential", initial = 1, multiplier = 2, max = 32, step = 1,
                      jitter = "additive", jitter_max = 1, cap_jitter = false }, q.backoff)
  end)

  it("defaults max to initial when initial is above 32", function()
    local p = assert(lr.load_string("max_attempts = 3\nbackoff = { initial = 50, jitter = 'none' }"))
    assert.are.equal(50, p:tuning().backoff.max)
    assert.are.equal(50, p:sample{ n = 10 }[1])
  end)

  it("cuts the body handed to the script to body_limit", function()
    local p = assert(lr.load_string([[
      max_attempts = 3
      body_limit = 4
      function is_transient(status, body) return #body == 4 and body == "abcd" end
    ]]))
    assert.are.equal("retry", p:classify{ status = 503, body = "abcdefghij" }.verdict)
    assert.are.equal("final", p:classify{ status = 503, body = "abc" }.verdict)
  end)

  it("refuses use of a closed policy", function()
    local p = assert(lr.load_string("max_attempts = 2"))
    local c = p:begin{ virtual = true }
    p:close()
    assert.has_error(function() p:tuning() end, "policy is closed")
    assert.has_error(function() c:report{ status = 503 } end)
  end)
end)

describe("policies dropped without close", function()
  -- the collector saw a box of 40 bytes for each policy's 40 KiB of Lua
  -- states: 2000 dropped ones grew the process by some 80 MiB before a
  -- cycle came.  (Resident memory is asserted in the normal build only:
  -- ASan's quarantine and valgrind's freed-block queue keep what is freed.)
  it("are collected in pace: 2000 of them grow the process by far less than they hold", function()
    local proc = require "support.proc"
    if proc.asan() or (os.getenv("LD_PRELOAD") or ""):find("vgpreload", 1, true) then return end
    local function rss()
      return tonumber(proc.readfile("/proc/self/status"):match("VmRSS:%s+(%d+)")) * 1024
    end
    collectgarbage()
    local before, peak = rss(), 0
    for i = 1, 2000 do
      local p = assert(lr.load(HTTP))
      assert.is_true(p:memory() > 20000)
      if i % 100 == 0 then peak = math.max(peak, rss()) end
    end
    assert.is_true(peak - before < 24 * 1024 * 1024, ("grew %.1f MiB"):format((peak - before) / 1048576))
  end)
end)

describe("the step API", function()
  local SRC = "max_attempts = 3\nbackoff = { initial = 2, jitter = 'none' }\n"

  it("reports decisions with every field", function()
    local p = assert(lr.load_string(SRC, "=step"))
    local c = assert(p:begin{ seed = 1, virtual = true })
    assert.are.equal(0, c:elapsed())
    assert.are.equal(0, c:timeout()) -- no deadline, no attempt_timeout
    local d = c:report{ status = 503 }
    assert.are.same({ retry = true, verdict = "retry", attempt = 1, wait = 2, next_timeout = 0,
                      elapsed = 0, source = "backoff", rule = "default" }, d)
    assert.is_true(c:wait(d.wait))
    assert.are.equal(2, c:elapsed())
    local e = c:report{ status = 200 }
    assert.are.same({ retry = false, verdict = "success", attempt = 2, wait = 0, next_timeout = 0,
                      elapsed = 2, source = "none", rule = "default" }, e)
  end)

  it("refuses a report after the call stopped", function()
    local p = assert(lr.load_string(SRC))
    local c = p:begin{ seed = 1, virtual = true }
    assert.are.equal("final", c:report{ status = 404 }.verdict)
    local ok, msg, name = c:report{ status = 503 }
    assert.is_nil(ok)
    has(msg, "already stopped")
    assert.are.equal("call used out of order", name)
  end)

  it("cancel ends a wait and stops the call", function()
    local p = assert(lr.load_string(SRC))
    local c = p:begin{ seed = 1, virtual = true }
    assert.is_true(c:report{ status = 503 }.retry)
    c:cancel()
    local ok, msg = c:wait(5)
    assert.is_nil(ok)
    assert.are.equal("cancelled", msg)
    assert.are.equal(0, c:elapsed())
    local d = c:report{ status = 503 }
    assert.is_false(d.retry)
    assert.are.equal("cancelled", d.verdict)
  end)

  it("waits on the real clock when not virtual, never shorter", function()
    local p = assert(lr.load_string(SRC))
    local c = p:begin{ seed = 1 }
    local before = c:elapsed()
    assert.is_true(c:wait(0.02))
    assert.is_true(c:elapsed() - before >= 0.02)
  end)

  it("gives every call its own attempt count", function()
    local p = assert(lr.load_string(SRC))
    local a, b = p:begin{ virtual = true, seed = 1 }, p:begin{ virtual = true, seed = 2 }
    a:report{ status = 503 }
    a:report{ status = 503 }
    assert.are.equal("exhausted", a:report{ status = 503 }.verdict)
    assert.are.equal(1, b:report{ status = 503 }.attempt)
  end)
end)

describe("a call's own deadline", function()
  local SRC = "max_attempts = 10\ndeadline = 10\nbackoff = { initial = 1, multiplier = 2, jitter = 'none' }\n"

  it("p:begin{ deadline = }: the earlier of it and the policy's wins", function()
    local p = assert(lr.load_string(SRC))
    local t0 = lr.clock()
    assert.is_true(math.abs(lr.deadline_in(2.5) - (t0 + 2.5)) < 1) -- the same clock
    local c = p:begin{ seed = 1, virtual = true, deadline = lr.deadline_in(2.5) }
    local left = c:timeout() -- the first attempt's: what is left of 2.5 s
    assert.is_true(left > 0 and left <= 2.5)
    assert.is_true(c:report{ status = 503 }.retry) -- the next at 1 s
    c:wait(1)
    local d = c:report{ status = 503 } -- the next would start at 3 s
    assert.are.equal("deadline", d.verdict)
    assert.are.equal(2, d.attempt)
    -- a later one leaves the policy's 10 s
    local late = p:begin{ seed = 1, virtual = true, deadline = lr.deadline_in(100) }
    assert.are.equal(10, late:timeout())
  end)

  it("p:run{ deadline = } on the real clock stops by it", function()
    local p = assert(lr.load_string("max_attempts = 1000\nattempt_timeout = 60\n" ..
                                    "backoff = { initial = 0.05, multiplier = 1, jitter = 'none' }\n"))
    local longest = 0
    local d = p:run(function(_, timeout)
      longest = math.max(longest, timeout)
      return 503
    end, { deadline = lr.deadline_in(0.3) })
    assert.are.equal("deadline", d.verdict)
    assert.is_true(longest > 0 and longest <= 0.3)
  end)

  it("a deadline passed, NaN or negative ends the call at once", function()
    local p = assert(lr.load_string(SRC))
    for _, at in ipairs({ lr.deadline_in(-1), 0 / 0, -5 }) do
      local calls = 0
      local d = p:run(function() calls = calls + 1; return 503 end, { virtual = true, deadline = at })
      assert.are.equal("deadline", d.verdict)
      assert.are.equal(0, calls)
      assert.are.equal(0, d.elapsed)
    end
  end)

  it("names a deadline that is no number", function()
    local p = assert(lr.load_string(SRC))
    local ok, err = pcall(p.begin, p, { deadline = "soon" })
    assert.is_false(ok)
    has(err, "deadline: a time on luaretry.clock() expected")
  end)
end)

describe("p:run", function()
  local SRC = "max_attempts = 5\nbackoff = { initial = 1, jitter = 'none' }\n"

  it("accepts an outcome table or status, body from fn", function()
    local p = assert(lr.load_string(SRC))
    local d = p:run(function(attempt)
      if attempt == 1 then return { status = 0, error = "connect" } end
      if attempt == 2 then return 502, "bad gateway" end
      return { status = 201, body = "created" }
    end, { seed = 3, virtual = true })
    assert.are.equal("success", d.verdict)
    assert.are.equal(3, d.attempt)
    assert.are.equal(3, d.elapsed) -- 1 + 2 on the virtual clock
  end)

  it("stops on a final outcome", function()
    local p = assert(lr.load_string(SRC))
    local calls = 0
    local d = p:run(function() calls = calls + 1; return 404 end, { seed = 3, virtual = true })
    assert.are.equal(1, calls)
    assert.are.equal("final", d.verdict)
  end)

  it("lets an error in fn through as it was", function()
    local p = assert(lr.load_string(SRC))
    local ok, err = pcall(p.run, p, function() error({ code = 7 }) end, { virtual = true })
    assert.is_false(ok)
    assert.are.same({ code = 7 }, err)
    -- and the policy is still usable
    assert.are.equal("retry", p:classify{ status = 503 }.verdict)
  end)

  -- what the engine's other readers do: the curl helper and testing.run
  it("reads Retry-After from the headers an outcome carries, in every form fn may return", function()
    local p = assert(lr.load_string(SRC))
    local forms = {
      -- 503s: a 429 would be throttling, with a backoff of its own
      function() return { status = 503, headers = { ["Retry-After"] = "7" } } end,
      function() return 503, "slow down", { ["retry-after"] = "7" } end,
      function() return 503, nil, { ["RETRY-AFTER"] = "garbage", ["X-Other"] = "1" } end,
    }
    local waits = {}
    for i, fn in ipairs(forms) do
      local seen = {}
      local d = p:run(function(attempt)
        if attempt == 2 then return 200, "ok" end
        return fn()
      end, { seed = 1, virtual = true })
      assert.are.equal("success", d.verdict, i)
      waits[i] = d.elapsed
    end
    assert.are.same({ 7, 7, 1 }, waits)   -- garbage is ignored: the backoff's 1 s
    -- an explicit retry_after wins over the header, as in testing.run
    local d = p:run(function(attempt)
      if attempt == 2 then return 200 end
      return { status = 503, retry_after = 3, headers = { ["Retry-After"] = "9" } }
    end, { seed = 1, virtual = true })
    assert.are.equal(3, d.elapsed)
    -- p:classify and the step API read the same header
    assert.are.equal("server", p:classify{ status = 503, headers = { ["Retry-After"] = "4" } }.source)
    assert.are.equal(4, p:classify{ status = 503, headers = { ["Retry-After"] = "4" } }.wait)
    local c = p:begin{ seed = 1, virtual = true }
    assert.are.equal(4, c:report{ status = 503, headers = { ["Retry-After"] = "4" } }.wait)
    c:close()
  end)

  it("gives the waits testing.run gives on the same outcomes", function()
    local testing = require "testing"
    local outcomes = { { status = 503, headers = { ["Retry-After"] = "5" } }, "reset",
                       { status = 502, headers = { ["Retry-After"] = "2" } }, 200 }
    local p = assert(lr.load_string(SRC))
    local d = p:run(function(attempt) return testing.outcome(outcomes[attempt]) end, { seed = 1, virtual = true })
    local r = testing.run(p, outcomes, { seed = 1 })
    assert.are.equal(r.verdict, d.verdict)
    assert.are.equal(r.attempts, d.attempt)
    local total = 0
    for _, w in ipairs(r.waits) do total = total + w end
    assert.are.equal(total, d.elapsed)
    -- 5 (the server's), 2 (the backoff: 1 x2), 4 (the backoff, longer than the server's 2)
    assert.are.equal(5 + 2 + 4, d.elapsed)
  end)

  -- A misspelt option was once ignored without a word: p:begin{ virtaul =
  -- true } ran on the real clock, p:schedule{ attempt = 3 } to the end.
  it("refuses an option it does not know, naming the ones it does", function()
    local p = assert(lr.load_string(SRC))
    local ran = 0
    local cases = {
      { function() return p:begin{ virtaul = true } end,
        "p:begin: unknown option 'virtaul' (seed, virtual, isolated, deadline, retries or inbound expected)" },
      { function() return p:run(function() ran = ran + 1 return 200 end, { sead = 1 }) end,
        "p:run: unknown option 'sead' (seed, virtual" },
      { function() return p:schedule{ attempt = 3 } end, "p:schedule: unknown option 'attempt' (seed or attempts expected)" },
      { function() return p:sample{ n = 1, cout = 3 } end,
        "p:sample: unknown option 'cout' (n, count, seed or previous expected)" },
      { function() return p:begin(42) end, "p:begin: options: a table expected, got number" },
      { function() return p:begin{ true } end, "p:begin: options: a number key (seed, virtual" },
    }
    for _, case in ipairs(cases) do
      local ok, err = pcall(case[1])
      assert.is_false(ok)
      has(err, case[2])
    end
    assert.are.equal(0, ran)
    local c = assert(p:begin{ seed = 1, virtual = true, isolated = true, deadline = lr.deadline_in(5), retries = 2,
                              inbound = {} })
    c:close()
    assert.are.equal(3, #p:schedule{ seed = 1, attempts = 3 })
  end)

  it("names the field of an outcome of the wrong type", function()
    local p = assert(lr.load_string(SRC))
    local cases = {
      { { status = "503" }, "outcome.status: expected a whole number, got string" },
      { { status = 503.5 }, "outcome.status: expected a whole number, got number" },
      { { status = 1000 }, "outcome.status: 1000 out of range (0 to 999)" },
      { { status = 503, body = 5 }, "outcome.body: expected a string, got number" },
      { { status = 0, error = true }, "outcome.error: expected a string, got boolean" },
      { { status = 503, retry_after = "5" }, "outcome.retry_after: expected a number of seconds, got string" },
      { { status = 503, headers = "Retry-After: 5" }, "outcome.headers: expected a table of name = value strings, got string" },
      { { status = 503, headers = { ["Retry-After"] = 5 } }, "outcome.headers: expected name = value strings, got string = number" },
      { { status = 503, kind = "cmd" }, 'outcome.kind: expected "http" or "command", got "cmd"' },
      { 503, "outcome: expected a table, got number" },
    }
    for _, case in ipairs(cases) do
      local ok, err = pcall(p.classify, p, case[1])
      assert.is_false(ok)
      has(err, case[2])
      assert.is_nil(err:find("bad argument", 1, true), err)
      local c = p:begin{ virtual = true }
      ok, err = pcall(c.report, c, case[1])
      assert.is_false(ok)
      has(err, case[2])
      c:close()
      if type(case[1]) == "table" then
        ok, err = pcall(p.run, p, function() return case[1] end, { virtual = true })
        assert.is_false(ok)
        has(err, case[2])
      end
    end
    -- what fn returns besides a table
    local ok, err = pcall(p.run, p, function() return 503, "busy", "Retry-After: 5" end, { virtual = true })
    assert.is_false(ok)
    has(err, "p:run: the function returned number, string and string")
    ok, err = pcall(p.run, p, function() return "503" end, { virtual = true })
    assert.is_false(ok)
    has(err, "p:run: the function returned string, nil and nil")
    -- and the policy goes on
    assert.are.equal("retry", p:classify{ status = 503 }.verdict)
  end)

  it("names the field of a request of the wrong type", function()
    local p = assert(lr.load_string(SRC))
    local c = p:begin{ virtual = true }
    for _, case in ipairs{
      { { method = {} }, "request.method: expected a string, got table" },
      { { url = true }, "request.url: expected a string, got boolean" },
      { { body = false }, "request.body: expected a string, got boolean" },
    } do
      for _, f in ipairs{ function() return c:prepare(case[1], 1) end,
                          function() return c:is_idempotent(case[1]) end,
                          function() return p:is_idempotent(case[1]) end } do
        local ok, err = pcall(f)
        assert.is_false(ok)
        has(err, case[2])
        assert.is_nil(err:find("bad argument", 1, true), err)
      end
    end
    assert.are.equal("12", c:prepare({ url = "http://x.invalid/", body = 12 }, 1).body) -- a number reads
    c:close()
  end)

  it("works with the OS seed", function()
    local p = assert(lr.load_string(SRC))
    local d = p:run(function() return 503 end, { virtual = true })
    assert.are.equal("exhausted", d.verdict)
    assert.are.equal(5, d.attempt)
  end)
end)

describe("policies/http.lua", function()
  local p = assert(lr.load(HTTP))

  it("has the tuning its header documents", function()
    local t = p:tuning()
    assert.are.equal("http", t.name)
    assert.are.equal(10, t.max_attempts)
    assert.are.equal(300, t.deadline)
    assert.are.same({ kind = "exponential", initial = 1, multiplier = 2, max = 32, step = 1,
                      jitter = "additive", jitter_max = 1, cap_jitter = false }, t.backoff)
    assert.are.same({}, p:warnings())
  end)

  it("retries 408, 429, 500, 502, 503, 504 and every transport failure", function()
    for _, s in ipairs{ 408, 429, 500, 502, 503, 504 } do
      local d = p:classify{ status = s }
      assert.are.equal("retry", d.verdict, "status " .. s)
      has(d.rule, "http.lua:")
    end
    for _, e in ipairs{ "connect", "timeout", "reset", "dns", "tls" } do
      assert.are.equal("retry", p:classify{ status = 0, error = e }.verdict, e)
    end
  end)

  it("stops on other statuses and succeeds on 2xx and 3xx", function()
    for _, s in ipairs{ 400, 401, 403, 404, 409, 410, 422, 501, 505, 511 } do
      assert.are.equal("final", p:classify{ status = s }.verdict, "status " .. s)
    end
    for _, s in ipairs{ 200, 204, 302 } do
      assert.are.equal("success", p:classify{ status = s }.verdict, "status " .. s)
    end
  end)

  it("gives ten attempts with Google's truncated exponential backoff", function()
    for seed = 1, 20 do
      local s = p:schedule{ seed = seed }
      assert.are.equal(10, #s)
      for n = 0, 8 do
        local v = math.min(2 ^ n, 32)
        assert.is_true(s[n + 1].wait >= v and s[n + 1].wait <= v + 1)
      end
      assert.are.equal("exhausted", s[10].verdict)
    end
  end)
end)

-- What README's "The Lua module" promises of these, each.
describe("the module's documented helpers", function()
  it("luaretry.retry_after reads delta-seconds and HTTP-dates, nil for garbage", function()
    assert.are.equal(5, lr.retry_after("5"))
    assert.are.equal(30, lr.retry_after("Thu, 01 Jan 1970 00:01:00 GMT", 30))
    assert.is_nil(lr.retry_after("-1"))
    assert.is_nil(lr.retry_after("soon"))
    assert.is_nil(lr.retry_after("Thu, 01 Jan 1970 00:01:00 GMT", 120))  -- past
  end)

  it("p:is_idempotent: the script's rule, else the method rule", function()
    local p = assert(lr.load_string("max_attempts = 2"))
    assert.is_true(p:is_idempotent{ method = "PUT" })
    assert.is_false(p:is_idempotent{ method = "POST" })
    local q = assert(lr.load_string([[
max_attempts = 2
function is_idempotent(r) return r.headers["Idempotency-Key"] ~= nil end]]))
    assert.is_true(q:is_idempotent{ method = "POST", headers = { ["Idempotency-Key"] = "k1" } })
    assert.is_false(q:is_idempotent{ method = "GET" })
  end)

  -- Up to 64 headers fit in a buffer on the C stack; beyond it, every one
  -- was once dropped without a word, whichever the table's order put last.
  it("reads every header of an outcome or a request, past 64, and names one of the wrong type", function()
    local many = {}
    for i = 1, 200 do many["X-Filler-" .. i] = "v" .. i end
    many["Retry-After"] = "7"
    local p = assert(lr.load_string("max_attempts = 3\nbackoff = { initial = 2, jitter = 'none' }\n"))
    local d = p:classify{ status = 503, headers = many }
    assert.are.equal("server", d.source)
    assert.are.equal(7, d.wait)
    local q = assert(lr.load_string([[
max_attempts = 2
function is_idempotent(r)
  local n = 0
  for _ in pairs(r.headers) do n = n + 1 end
  return n == 201 and r.headers["Retry-After"] == "7"
end]]))
    assert.is_true(q:is_idempotent{ method = "POST", headers = many })
    local ok, err = pcall(q.is_idempotent, q, { method = "POST", headers = { ["Content-Length"] = 5 } })
    assert.is_false(ok)
    has(err, "request.headers: expected name = value strings, got string = number")
    ok, err = pcall(q.is_idempotent, q, { method = "POST", headers = { "Idempotency-Key: k1" } })
    assert.is_false(ok)
    has(err, "request.headers: expected name = value strings, got number = string")
    ok, err = pcall(q.is_idempotent, q, { method = "POST", headers = "Idempotency-Key: k1" })
    assert.is_false(ok)
    has(err, "request.headers: expected a table of name = value strings, got string")
  end)

  it("p:reload_if_changed: false when unchanged; p:close: every use refused after", function()
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write("max_attempts = 2\n")
    f:close()
    local p = assert(lr.load(path))
    assert.is_false(p:reload_if_changed())
    p:close()
    local ok, err = pcall(p.reload_if_changed, p)
    assert.is_false(ok)
    has(err, "policy is closed")
    os.remove(path)
  end)
end)
