-- Numbers at the edge of a double (every float-to-integer conversion
-- is clamped): deadlines, waits, timeouts and jitter near
-- 1e308 neither overflow nor wrap.  Under `make test`'s sanitizer pass this
-- runs with -fsanitize=float-cast-overflow, which aborts on any unclamped
-- conversion; in the normal build the values themselves are checked.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
local proc = require "support.proc"
local lr = require "luaretry"

local HUGE = [[
max_attempts = 1000000000
deadline = 1e308
attempt_timeout = 1e308
max_retry_after = 1e308
backoff = { initial = 1e300, max = 1e308, jitter = "additive", jitter_max = 1e308 }
breaker = { failures = 1000000000, open_seconds = 1e308, probes = 1000000000 }
budget = { max_tokens = 1000, token_ratio = 1000 }
]]

describe("numbers near the top of a double", function()
  it("a call with a 1e308 s deadline waits 1e300 s on virtual time and counts it", function()
    local p = assert(lr.load_string(HUGE, "=huge"))
    local c = p:begin { virtual = true, seed = 1 }
    for _ = 1, 3 do
      local d = c:report { status = 503, headers = { ["Retry-After"] = "99999999999999999999999" } }
      assert.are.equal("retry", d.verdict)
      assert.is_true(d.wait >= 1e300 and d.wait < math.huge)
      local t = c:timeout()
      assert.is_true(t > 0 and t < math.huge)
      assert(c:wait(1e300))
    end
    -- the counter holds nanoseconds: it saturates, it never wraps to 0 or below
    local waited = p:metrics().time_waited
    assert.is_true(waited > 1e9, "time_waited " .. waited)
  end)

  it("a schedule reaches the deadline, never inf, NaN or a negative wait", function()
    local p = assert(lr.load_string(HUGE, "=huge"))
    local last
    for _, d in ipairs(p:schedule { seed = 3, attempts = 50 }) do
      assert.is_true(d.wait >= 0 and d.wait == d.wait and d.wait < math.huge)
      last = d
    end
    assert.are.equal("deadline", last.verdict)
  end)

  it("simulate prints a 1e300 s wait in a few digits", function()
    local r = proc.run({ "simulate", proc.root .. "/policies/http.lua", "--set", "deadline=1e308",
                         "--set", "backoff.initial=1e300", "--set", "backoff.max=1e308",
                         "--attempts", "4" }, { timeout = 30 })
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("attempt 1: retry in 1e%+300 s %(backoff%)", r.stdout)
    assert.matches("attempt 4: exhausted at 7e%+300 s", r.stdout)
    assert.is_true(#r.stdout < 400)
  end)

  it("a real call with 1e308 s limits runs (timeouts handed to libcurl are clamped)", function()
    local srv = proc.server(here .. "/fixtures/run/server.lua")
    finally(function() srv:stop() end)
    local r = proc.run({ "run", proc.root .. "/policies/http.lua", srv.base .. "/flaky",
                         "--set", "deadline=1e308", "--set", "attempt_timeout=1e308",
                         "--set", "backoff.initial=0.01", "--set", "backoff.jitter=none",
                         "--set", "max_retry_after=1e308" }, { timeout = 30 })
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("attempt 3/10: 200 %-> success", r.stderr)
  end)
end)
