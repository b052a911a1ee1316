-- lua/testing.lua: the helpers for policy authors' specs.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local lr = require "luaretry"
local testing = require "testing"

local FIX = here .. "fixtures/"
local SCRIPTED = FIX .. "t_scripted.lua"

local function has(haystack, needle)
  assert.is_string(haystack)
  assert.is_truthy(haystack:find(needle, 1, true),
    ("expected to find %q in:\n%s"):format(needle, haystack))
end

describe("testing.outcome", function()
  it("reads a number as a status", function()
    assert.are.same({ status = 503 }, testing.outcome(503))
    assert.are.same({ status = 200 }, testing.outcome(200.0))
    assert.is_true(math.type(testing.outcome(200.0).status) == "integer")
  end)

  it("reads a transport failure's name as status 0 with that error", function()
    for _, e in ipairs { "reset", "timeout", "connect", "dns", "tls", "tls_verify", "truncated",
                         "protocol", "transport" } do
      assert.are.same({ status = 0, error = e }, testing.outcome(e))
    end
  end)

  it("copies a table, leaving the caller's alone", function()
    local t = { status = 409, body = "x", workflow = true, headers = { A = "1" } }
    local o = testing.outcome(t)
    assert.are.same(t, o)
    assert.are_not.equal(t, o)
  end)

  it("refuses unknown names, fractions and other types", function()
    assert.has_error(function() testing.outcome("timout") end)
    assert.has_error(function() testing.outcome(503.5) end)
    assert.has_error(function() testing.outcome(true) end)
    local ok, err = pcall(testing.outcome, "timout")
    assert.is_false(ok)
    has(err, '"timout"')
  end)
end)

describe("testing.run", function()
  it("503, 503, 200: three attempts, two waits, success", function()
    local r = testing.run(SCRIPTED, { 503, 503, 200 })
    assert.are.equal(3, r.attempts)
    assert.are.equal("success", r.verdict)
    assert.are.equal(2, #r.waits)
    assert.is_true(r.waits[1] >= 1 and r.waits[1] <= 1.5)
    assert.is_true(r.waits[2] >= 2 and r.waits[2] <= 2.5)
    assert.are.equal(r.waits[1] + r.waits[2], r.elapsed)
    assert.are.equal(3, #r.decisions)
    assert.are.equal(r.decisions[3], r.final)
    assert.are.equal("default", r.rule)
    assert.is_nil(r.message)
  end)

  it("asks c:next before each attempt, as run does: a rate limiter's waits are in its waits", function()
    -- one token every 2 s: each retry waits for it, not the 0.1 s backoff
    local rate = "max_attempts = 4\ndeadline = 100\nattempt_timeout = 1\n" ..
                 "backoff = { initial = 0.1, jitter = 'none' }\nrate = { limit = 0.5, burst = 1 }\n"
    local p = assert(lr.load_string(rate, "=rate"))
    local r = testing.run(p, { 503 }, { seed = 1 })
    assert.are.equal("exhausted", r.verdict)
    assert.are.equal(4, r.attempts)
    for i = 1, 3 do assert.is_true(math.abs(r.waits[i] - 2) < 1e-6, "wait " .. i .. ": " .. r.waits[i]) end
    local d = p:run(function() return 503 end, { virtual = true, seed = 1, isolated = true })
    assert.is_true(math.abs(d.elapsed - r.elapsed) < 1e-6, d.elapsed .. " vs " .. r.elapsed)
    -- http.lua's adaptive rate under 429s: the call lasts as p:run's
    local http = assert(lr.load(here .. "../policies/http.lua"))
    r = testing.run(http, { 429 }, { seed = 1 })
    d = http:run(function() return 429 end, { virtual = true, seed = 1, isolated = true })
    assert.are.equal(d.attempt, r.attempts)
    assert.is_true(math.abs(d.elapsed - r.elapsed) < 1e-6, d.elapsed .. " vs " .. r.elapsed)
  end)

  it("repeats the last entry until the policy stops", function()
    local r = testing.run(SCRIPTED, { 503 }, { set = { ["backoff.jitter"] = "none" } })
    assert.are.equal(5, r.attempts)
    assert.are.equal("exhausted", r.verdict)
    assert.are.equal("max_attempts", r.rule)
    assert.are.same({ 1, 2, 4, 4 }, r.waits)
    assert.are.equal(11, r.elapsed)
  end)

  it("stops on a final outcome", function()
    local r = testing.run(SCRIPTED, { 503, 404, 200 }, { set = { ["backoff.jitter"] = "none" } })
    assert.are.equal(2, r.attempts)
    assert.are.equal("final", r.verdict)
    assert.are.same({ 1 }, r.waits)
    has(r.rule, "t_scripted.lua:")
  end)

  it("gives the script's own waits and a retry at once", function()
    local r = testing.run(SCRIPTED, { 429, "reset", "timeout", 200 },
                          { set = { ["backoff.jitter"] = "none" } })
    assert.are.equal(4, r.attempts)
    assert.are.same({ 7.25, 0, 4 }, r.waits)
    assert.are.equal("script", r.decisions[1].source)
    assert.are.equal("script", r.decisions[2].source)
    assert.are.equal("backoff", r.decisions[3].source)
  end)

  it("reports a policy error with its message", function()
    local r = testing.run(SCRIPTED, { 503, 599 })
    assert.are.equal(2, r.attempts)
    assert.are.equal("policy_error", r.verdict)
    has(r.message, "deliberate failure")
    has(r.message, "t_scripted.lua:")
  end)

  it("stops at the deadline", function()
    local r = testing.run(FIX .. "t_deadline.lua", { 503 })
    assert.are.equal("deadline", r.verdict)
    assert.are.same({ 2, 2, 2 }, r.waits)   -- a fourth wait would end at 8 > 7
    assert.are.equal(4, r.attempts)
    assert.are.equal(6, r.elapsed)
    has(r.message, "past the deadline")
  end)

  it("lets attempts last: opts.duration, a number or a function", function()
    local r = testing.run(FIX .. "t_deadline.lua", { 503 }, { duration = 1 })
    -- 0-1 attempt, 1-3 wait, 3-4, 4-6, 6-7: the third wait would pass 7
    assert.are.same({ 2, 2 }, r.waits)
    assert.are.equal(3, r.attempts)
    assert.are.equal(7, r.elapsed)
    local seen = {}
    local q = testing.run(SCRIPTED, { 503, 200 }, {
      duration = function(attempt) seen[#seen + 1] = attempt; return 0.25 end,
      set = { ["backoff.jitter"] = "none" } })
    assert.are.same({ 1, 2 }, seen)
    assert.are.equal(1.5, q.elapsed)
    assert.has_error(function() testing.run(SCRIPTED, { 503 }, { duration = -1 }) end)
  end)

  it("ends an attempt that outlasts its timeout as a timeout", function()
    -- 7 s deadline: the first attempt's timeout is 7 s
    local r = testing.run(FIX .. "t_deadline.lua", { 200 }, { duration = 10 })
    assert.are.equal(1, r.attempts)
    assert.are.equal("deadline", r.verdict)
    assert.are.equal(7, r.elapsed)
  end)

  it("adds opts.outcome to every outcome", function()
    local aborted = { status = 409, body = '{"error":{"status":"ABORTED"}}' }
    assert.are.equal("final", testing.run(SCRIPTED, { aborted }).verdict)
    local r = testing.run(SCRIPTED, { aborted, 200 }, { outcome = { workflow = true } })
    assert.are.equal("success", r.verdict)
    assert.are.equal(2, r.attempts)
    -- an outcome's own field wins
    local own = { status = 409, body = aborted.body, workflow = false }
    assert.are.equal("final", testing.run(SCRIPTED, { own }, { outcome = { workflow = true } }).verdict)
  end)

  it("is the same for the same seed and differs between seeds", function()
    local a = testing.run(SCRIPTED, { 503 }, { seed = 42 })
    local b = testing.run(SCRIPTED, { 503 }, { seed = 42 })
    local c = testing.run(SCRIPTED, { 503 }, { seed = 43 })
    assert.are.same(a.waits, b.waits)
    assert.are_not.same(a.waits, c.waits)
    assert.are.same(testing.run(SCRIPTED, { 503 }).waits, testing.run(SCRIPTED, { 503 }, { seed = 1 }).waits)
  end)

  it("takes a loaded policy", function()
    local p = assert(lr.load(SCRIPTED))
    assert.are.equal(3, testing.run(p, { 503, 503, 200 }).attempts)
    assert.has_error(function() testing.run(p, { 503 }, { set = { max_attempts = 2 } }) end)
  end)

  it("applies opts.set, and raises a load error with its detail", function()
    assert.are.equal(2, testing.run(SCRIPTED, { 503 }, { set = { max_attempts = 2 } }).attempts)
    local ok, err = pcall(testing.run, SCRIPTED, { 503 }, { set = { max_attemps = 2 } })
    assert.is_false(ok)
    has(err, "did you mean max_attempts?")
    ok, err = pcall(testing.run, FIX .. "t_no_such_file.lua", { 503 })
    assert.is_false(ok)
    has(err, "t_no_such_file.lua")
  end)

  it("gives up on a policy that never stops on the virtual clock", function()
    local ok, err = pcall(testing.run, FIX .. "t_zero.lua", { 503 }, { limit = 50 })
    assert.is_false(ok)
    has(err, "still retrying after 50 attempts")
  end)

  it("refuses an empty list", function()
    assert.has_error(function() testing.run(SCRIPTED, {}) end)
  end)
end)

describe("testing.classify and testing.verdicts", function()
  it("classify gives the decision on one outcome as a first attempt", function()
    local d = testing.classify(SCRIPTED, 429)
    assert.are.equal("retry", d.verdict)
    assert.are.equal(7.25, d.wait)
    assert.are.equal(1, d.attempt)
    assert.are.equal(0, testing.classify(SCRIPTED, "reset").wait)
  end)

  it("verdicts gives each outcome's verdict, and the decisions", function()
    local v, d = testing.verdicts(SCRIPTED, { 200, 404, 503, "dns", 599 })
    assert.are.same({ "success", "final", "retry", "retry", "policy_error" }, v)
    assert.are.equal(5, #d)
    has(d[5].message, "deliberate failure")
  end)

  it("verdicts takes opts.outcome and opts.set", function()
    local aborted = { status = 409, body = "ABORTED" }
    assert.are.same({ "final" }, testing.verdicts(SCRIPTED, { aborted }))
    assert.are.same({ "retry" }, testing.verdicts(SCRIPTED, { aborted }, { outcome = { workflow = true } }))
    assert.are.same({ "exhausted" }, testing.verdicts(SCRIPTED, { 503 }, { set = { max_attempts = 1 } }))
  end)
end)

describe("testing.waits and testing.wait_range", function()
  it("waits is the schedule of a call that always fails", function()
    local w, r = testing.waits(SCRIPTED, { set = { ["backoff.jitter"] = "none" } })
    assert.are.same({ 1, 2, 4, 4 }, w)
    assert.are.equal("exhausted", r.verdict)
    assert.are.same({ 7.25, 7.25, 7.25, 7.25 }, (testing.waits(SCRIPTED, { outcome = 429 })))
  end)

  it("wait_range bounds each wait over many seeds", function()
    local b = testing.wait_range(SCRIPTED, { 503 }, { seeds = 300 })
    assert.are.equal(4, #b)
    local lo = { 1, 2, 4, 4 }
    for i, r in ipairs(b) do
      assert.are.equal(300, r.count)
      assert.is_true(r.min >= lo[i] and r.max <= lo[i] + 0.5, "retry " .. i)
      assert.is_true(r.max - r.min > 0.4, "retry " .. i .. " is spread")
    end
  end)
end)

describe("testing.is_idempotent and testing.script", function()
  it("calls the script's is_idempotent with the request", function()
    assert.is_true(testing.is_idempotent(SCRIPTED, { method = "GET", url = "http://x/" }))
    assert.is_false(testing.is_idempotent(SCRIPTED, { method = "POST", url = "http://x/" }))
    assert.is_true(testing.is_idempotent(SCRIPTED, { method = "POST", url = "http://x/",
                                                     headers = { ["Idempotency-Key"] = "k1" } }))
  end)

  it("falls back on the engine's method rule", function()
    local plain = FIX .. "t_deadline.lua"
    for _, m in ipairs { "GET", "HEAD", "OPTIONS", "PUT", "DELETE" } do
      assert.is_true(testing.is_idempotent(plain, { method = m }), m)
    end
    assert.is_true(testing.is_idempotent(plain, {}))
    assert.is_false(testing.is_idempotent(plain, { method = "POST" }))
    assert.is_false(testing.is_idempotent(plain, { method = "PATCH" }))
  end)

  it("needs a path when the module cannot call is_idempotent", function()
    local p = assert(lr.load(SCRIPTED))
    if p.is_idempotent then
      assert.is_false(testing.is_idempotent(p, { method = "POST" }))
    else
      assert.has_error(function() testing.is_idempotent(p, { method = "POST" }) end)
    end
  end)

  it("script runs a policy like the sandbox: its folder and lua/ for require, no io", function()
    local env = testing.script(SCRIPTED)
    assert.is_function(env.is_transient)
    assert.are.equal("t_scripted", env.name)
    assert.are.equal(5, env.max_attempts)
    assert.is_nil(env.io)
    assert.is_nil(env.dofile)
    assert.is_nil(env.string.dump)
    assert.is_nil(env.os.execute)
    assert.is_function(env.os.time)
    assert.is_true(env.require("t_helper").server_error(503))
    assert.is_function(env.require("retry").status_in)
    assert.are.equal(env.require("retry"), env.require("retry"))
    assert.has_error(function() env.require("no_such_module") end)
  end)
end)

-- The example of "Writing your own policy" (spec/policies_README_section.md),
-- word for word but for the path.
describe("the README example: orders.lua", function()
  local ORDERS = FIX .. "t_orders.lua"

  it("loads without warnings", function()
    assert.same({}, testing.load(ORDERS):warnings())
  end)

  it("retries busy answers and broken connections, not client errors", function()
    assert.same({ "retry", "retry", "retry", "final", "final", "final", "success" },
                testing.verdicts(ORDERS, { 503, 429, "reset", 400, 500, "tls_verify", 200 }))
  end)

  it("waits as long as the gateway says", function()
    local r = testing.run(ORDERS, { { status = 503, body = '{"retry_in_ms": 1500}' }, 200 })
    assert.same({ 1.5 }, r.waits)
    assert.equal("success", r.verdict)
  end)

  it("retries a conflict only when told to", function()
    assert.equal("final", testing.run(ORDERS, { 409, 200 }).verdict)
    local r = testing.run(ORDERS, { 409, 200 }, { set = { ["options.retry_conflict"] = true } })
    assert.equal("success", r.verdict)
  end)

  it("waits 0.5, 1, 2, 4 s without jitter, then gives up", function()
    local waits, r = testing.waits(ORDERS, { set = { ["backoff.jitter"] = "none" } })
    assert.same({ 0.5, 1, 2, 4 }, waits)
    assert.equal(5, r.attempts)
    assert.equal("exhausted", r.verdict)
  end)

  it("keeps every jittered wait between 0 and its step of the schedule", function()
    for i, b in ipairs(testing.wait_range(ORDERS, { 503 }, { seeds = 500 })) do
      local step = math.min(0.5 * 2 ^ (i - 1), 8)
      assert.is_true(b.min >= 0 and b.max <= step, "retry " .. i)
    end
  end)

  it("never runs past its 30 s deadline, however slow the service", function()
    local r = testing.run(ORDERS, { "timeout" }, { duration = 12 })  -- each attempt times out
    assert.equal("deadline", r.verdict)
    assert.is_true(r.elapsed <= 30)
  end)

  it("repeats a POST only with an Idempotency-Key", function()
    assert.is_false(testing.is_idempotent(ORDERS, { method = "POST", url = "https://orders.example/v1" }))
    assert.is_true(testing.is_idempotent(ORDERS, { method = "POST", url = "https://orders.example/v1",
                                                   headers = { ["Idempotency-Key"] = "k-1" } }))
    assert.is_true(testing.is_idempotent(ORDERS, { method = "GET", url = "https://orders.example/v1/7" }))
  end)
end)
