-- Calls on the virtual clock: attempts, deadlines, attempt timeouts and the
-- server's Retry-After.
local lr = require "luaretry"

local function load(src)
  local p, err = lr.load_string(src, "=schedule_spec")
  assert(p, err)
  return p
end

local HTTP_LIKE = [[
backoff = { initial = 1, multiplier = 2, max = 32, jitter = "additive", jitter_max = 1 }
]]

describe("max_attempts", function()
  it("max_attempts = 4 means exactly four attempts", function()
    local p = load("max_attempts = 4\n" .. HTTP_LIKE)
    local seen = {}
    local d = p:run(function(attempt, timeout)
      seen[#seen + 1] = attempt
      return 503, "busy"
    end, { seed = 1, virtual = true })
    assert.are.same({ 1, 2, 3, 4 }, seen)
    assert.are.equal("exhausted", d.verdict)
    assert.is_false(d.retry)
    assert.are.equal(4, d.attempt)
    assert.are.equal("max_attempts", d.rule)
  end)

  it("p:schedule follows max_attempts when attempts is not given", function()
    local p = load("max_attempts = 4\n" .. HTTP_LIKE)
    local s = p:schedule{ seed = 1 }
    assert.are.equal(4, #s)
    assert.are.equal("exhausted", s[4].verdict)
  end)

  it("a success stops the call at once", function()
    local p = load("max_attempts = 4\n" .. HTTP_LIKE)
    local calls = 0
    local d = p:run(function(attempt)
      calls = calls + 1
      if attempt < 3 then return { status = 503 } end
      return { status = 200, body = "ok" }
    end, { seed = 1, virtual = true })
    assert.are.equal(3, calls)
    assert.are.equal("success", d.verdict)
    assert.are.equal(3, d.attempt)
  end)

  it("max_attempts = 1 never retries", function()
    local p = load("max_attempts = 1\n" .. HTTP_LIKE)
    local d = p:classify{ status = 503 }
    assert.are.equal("exhausted", d.verdict)
    assert.are.equal(1, d.attempt)
  end)
end)

describe("the deadline on the virtual clock", function()
  -- Drives a call by hand; each attempt lasts `duration(timeout)` seconds.
  local function drive(p, seed, duration, outcome)
    local c = assert(p:begin{ seed = seed, virtual = true })
    local log = {}
    local d
    repeat
      local start, timeout = c:elapsed(), c:timeout()
      log[#log + 1] = { start = start, timeout = timeout }
      assert(c:wait(duration(timeout)))
      d = c:report(outcome or { status = 503 })
      if d.retry then
        log[#log].decision = d
        assert(c:wait(d.wait))
      end
    until not d.retry
    return log, d, c:elapsed()
  end

  it("deadline 300 against an always-transient outcome stops with \"deadline\"", function()
    local p = load("deadline = 300\n" .. HTTP_LIKE)
    for _, seed in ipairs{ 1, 2, 3, 77 } do
      local log, d, total = drive(p, seed, function() return 0 end)
      assert.are.equal("deadline", d.verdict)
      assert.is_false(d.retry)
      assert.are.equal("deadline", d.rule)
      assert.matches("past the deadline", d.message, 1, true)
      assert.is_true(total <= 300)
      assert.is_true(#log >= 10) -- 1+2+...+32 and then waits of ~32 s
      for i, a in ipairs(log) do
        assert.is_true(a.start < 300, "attempt " .. i .. " started after the deadline")
        assert.is_true(a.timeout > 0)
        assert.is_true(a.timeout <= 300 - a.start + 1e-9)
        if a.decision then
          -- the next attempt's timeout, as announced, is at most what is left
          local next_start = a.decision.elapsed + a.decision.wait
          assert.is_true(next_start < 300)
          assert.is_true(math.abs(a.decision.next_timeout - (300 - next_start)) < 1e-9)
        end
      end
    end
  end)

  it("attempts that take time count against the deadline", function()
    local p = load("deadline = 300\n" .. HTTP_LIKE)
    local log, d, total = drive(p, 5, function() return 7.5 end)
    assert.are.equal("deadline", d.verdict)
    assert.is_true(total <= 300)
    for i = 2, #log do
      -- each attempt began after the previous one's 7.5 s and its wait
      local prev = log[i - 1]
      assert.is_true(math.abs(log[i].start - (prev.start + 7.5 + prev.decision.wait)) < 1e-9)
      assert.is_true(log[i].start < 300)
      assert.is_true(math.abs(log[i].timeout - (300 - log[i].start)) < 1e-9)
    end
  end)

  it("with attempt_timeout, each timeout is min(attempt_timeout, time left)", function()
    local p = load("deadline = 300\nattempt_timeout = 100\n" .. HTTP_LIKE)
    -- every attempt runs into its timeout: 0, ~101, ~203 (97 s left)
    local log, d, total = drive(p, 9, function(t) return t end,
                                { status = 0, error = "timeout" })
    assert.are.equal("deadline", d.verdict)
    assert.is_true(total <= 300)
    local clipped = 0
    for _, a in ipairs(log) do
      local expected = math.min(100, 300 - a.start)
      assert.is_true(math.abs(a.timeout - expected) < 1e-9,
        ("start %.3f: timeout %.3f, expected %.3f"):format(a.start, a.timeout, expected))
      assert.is_true(a.start < 300)
      if expected < 100 then clipped = clipped + 1 end
    end
    assert.are.equal(100, log[1].timeout)
    assert.are.equal(3, #log)
    assert.is_true(clipped >= 1) -- the last attempt ran in what was left
  end)

  it("p:run passes each attempt its timeout and stops at the deadline", function()
    local p = load("deadline = 300\nattempt_timeout = 30\n" .. HTTP_LIKE)
    local log = drive(p, 21, function() return 0 end)
    local seen = {}
    local d = p:run(function(attempt, timeout)
      seen[#seen + 1] = { attempt = attempt, timeout = timeout }
      return 503, ""
    end, { seed = 21, virtual = true })
    assert.are.equal("deadline", d.verdict)
    assert.is_true(d.elapsed <= 300)
    -- the same seed gives the same call as the step API
    assert.are.equal(#log, #seen)
    for i, a in ipairs(seen) do
      assert.are.equal(i, a.attempt)
      assert.are.equal(log[i].timeout, a.timeout)
      assert.is_true(a.timeout <= math.min(30, 300 - log[i].start) + 1e-9)
    end
  end)

  it("a script's wait is bounded by the deadline", function()
    local p = load([[
      deadline = 300
      function is_transient(status) return 500 end
    ]])
    local d = p:classify{ status = 503 }
    assert.are.equal("deadline", d.verdict)
    assert.is_false(d.retry)
  end)

  it("max_attempts and deadline together: whichever comes first", function()
    local p = load("max_attempts = 3\ndeadline = 300\n" .. HTTP_LIKE)
    local s = p:schedule{ seed = 1 }
    assert.are.equal(3, #s)
    assert.are.equal("exhausted", s[3].verdict)
    local q = load("max_attempts = 50\ndeadline = 10\n" .. HTTP_LIKE)
    local t = q:schedule{ seed = 1 }
    assert.are.equal("deadline", t[#t].verdict)
    assert.is_true(#t < 50)
    assert.is_true(t[#t].elapsed < 10)
  end)
end)

describe("Retry-After", function()
  local NONE = "max_attempts = 5\nbackoff = { initial = 1, max = 32, jitter = 'none' }\n"

  it("waits exactly what the server asked when that is longer (no jitter)", function()
    local p = load(NONE)
    local d = p:classify{ status = 503, retry_after = 10 }
    assert.is_true(d.retry)
    assert.are.equal(10, d.wait)
    assert.are.equal("server", d.source)
  end)

  it("spreads upward by the jitter, never earlier than asked", function()
    local p = load("max_attempts = 5\n" .. HTTP_LIKE)
    local lo, hi = math.huge, 0
    for seed = 1, 300 do
      local c = p:begin{ seed = seed, virtual = true }
      local d = c:report{ status = 429, retry_after = 10 }
      assert.are.equal("server", d.source)
      lo, hi = math.min(lo, d.wait), math.max(hi, d.wait)
    end
    assert.is_true(lo >= 10 and hi <= 11)
    assert.is_true(hi - lo > 0.5) -- clients told the same instant do spread
  end)

  it("a longer backoff wins over a shorter Retry-After", function()
    local p = load("max_attempts = 5\nbackoff = { initial = 20, max = 60, jitter = 'none' }\n")
    local d = p:classify{ status = 503, retry_after = 5 }
    assert.are.equal(20, d.wait)
    assert.are.equal("backoff", d.source)
  end)

  it("is at least what the server asked, even over a script's shorter wait", function()
    local p = load([[
      max_attempts = 5
      backoff = { jitter = "none" }
      function is_transient() return 2 end
    ]])
    local d = p:classify{ status = 503, retry_after = 10 }
    assert.are.equal(10, d.wait)
    assert.are.equal("server", d.source)
    local e = p:classify{ status = 503 }
    assert.are.equal(2, e.wait)
    assert.are.equal("script", e.source)
  end)

  it("above max_retry_after stops at once with \"server_wait_too_long\" (no deadline was reached)", function()
    local p = load(NONE .. "max_retry_after = 50\n")
    local d = p:classify{ status = 503, retry_after = 60 }
    assert.is_false(d.retry)
    assert.are.equal("server_wait_too_long", d.verdict)
    assert.are.equal(1, d.attempt)
    assert.are.equal("max_retry_after", d.rule)
    local ok = p:classify{ status = 503, retry_after = 50 }
    assert.is_true(ok.retry)
    assert.are.equal(50, ok.wait)
  end)

  it("max_retry_after defaults to a finite 300 s", function()
    local p = load(NONE)
    assert.are.equal(300, p:tuning().max_retry_after)
    assert.are.equal("server_wait_too_long", p:classify{ status = 503, retry_after = 301 }.verdict)
  end)

  it("past the deadline stops at once with \"deadline\"", function()
    local p = load(NONE .. "deadline = 100\n")
    local d = p:classify{ status = 503, retry_after = 120 }
    assert.is_false(d.retry)
    assert.are.equal("deadline", d.verdict)
    assert.are.equal("retry_after", d.rule)
    local c = p:begin{ seed = 1, virtual = true }
    c:wait(80)
    local e = c:report{ status = 503, retry_after = 30 }
    assert.are.equal("deadline", e.verdict)
  end)

  it("is ignored when negative or when retry_after = false", function()
    local p = load(NONE)
    local d = p:classify{ status = 503, retry_after = -5 }
    assert.are.equal(1, d.wait)
    assert.are.equal("backoff", d.source)
    local q = load(NONE .. "retry_after = false\n")
    local e = q:classify{ status = 503, retry_after = 10 }
    assert.are.equal(1, e.wait)
    assert.are.equal("backoff", e.source)
  end)

  it("does not turn a final outcome into a retry", function()
    local p = load(NONE)
    local d = p:classify{ status = 404, retry_after = 1 }
    assert.are.equal("final", d.verdict)
  end)
end)
