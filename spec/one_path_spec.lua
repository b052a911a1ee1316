-- One code path for `luaretry check`, the testing helpers, `simulate` and
-- `run`: what each of them says of a policy is what a real call does.
-- Each probe and each testing.run has guards of its own; guards read the
-- call's clock (so a breaker opens, half-opens and closes on virtual
-- time); testing.run applies the idempotency rule, runs prepare and reads
-- Retry-After as the engine does; simulate follows a wait the script
-- chooses and fails on its errors.
local proc = require "support.proc"
local lr = require "luaretry"
local testing = require "testing"

local HTTP = proc.root .. "/policies/http.lua"

local function has(haystack, needle)
  assert.is_truthy(tostring(haystack):find(needle, 1, true),
    ("expected to find %q in:\n%s"):format(needle, tostring(haystack)))
end

local function write_policy(src)
  local path = os.tmpname() .. ".lua"
  proc.writefile(path, src)
  return path
end

describe("luaretry check", function()
  it("probes with guards of their own: a breaker or a budget never colours the table", function()
    for _, set in ipairs { "breaker.failures=3", "budget.max_tokens=4" } do
      local r = proc.run({ "check", HTTP, "--set", set }, { timeout = 60 })
      assert.are.equal(0, r.code, set .. "\n" .. r.stdout .. r.stderr)
      assert.is_falsy(r.stdout:find("circuit_open", 1, true), r.stdout)
      assert.is_falsy(r.stdout:find(" budget ", 1, true), r.stdout)
      assert.matches("\n  503%s+retry%s", r.stdout)
      assert.matches("\n  504%s+retry%s", r.stdout)
    end
  end)
end)

describe("the guards", function()
  local BREAKER = [[
max_attempts = 10
backoff = { initial = 1, jitter = "none" }
breaker = { failures = 2, open_seconds = 10, probes = 1 }
]]

  it("of two testing.run calls are their own: the second does not find the first's breaker open", function()
    local p = assert(lr.load_string(BREAKER, "=breaker"))
    local first = testing.run(p, { 503 })
    assert.are.equal("circuit_open", first.verdict)
    assert.are.equal(2, first.attempts)
    local second = testing.run(p, { 503, 200 })
    assert.are.equal("success", second.verdict)
    assert.are.equal("closed", p:metrics().breaker)  -- the policy's own breaker saw none of it
  end)

  it("read the call's clock: a breaker half-opens and closes on virtual time", function()
    local p = assert(lr.load_string(BREAKER, "=breaker"))
    local waiting = p:begin { virtual = true, seed = 1 }
    assert.are.equal("retry", waiting:report{ status = 503 }.verdict)
    local opener = p:begin { virtual = true, seed = 2 }
    -- the second failure in a row opens the breaker, so its own retry is refused
    assert.are.equal("circuit_open", opener:report{ status = 503 }.verdict)
    assert.are.equal("open", p:metrics().breaker)
    assert.are.equal("circuit_open", p:begin{ virtual = true }:next().verdict)
    -- 11 virtual seconds later the waiting call may go: the one probe
    assert(waiting:wait(11))
    assert.is_true(waiting:next().retry)
    assert.are.equal("half_open", p:metrics().breaker)
    assert.are.equal("success", waiting:report{ status = 200 }.verdict)
    assert.are.equal("closed", p:metrics().breaker)
  end)
end)

describe("testing.run, as `luaretry run` makes each attempt", function()
  it("applies the idempotency rule: a POST answered 503 is final, unless never sent", function()
    local r = testing.run(HTTP, { 503, 200 }, { request = { method = "POST", url = "http://x/" } })
    assert.are.equal("final", r.verdict)
    assert.are.equal("idempotency", r.rule)
    assert.are.equal(1, r.attempts)
    local s = testing.run(HTTP, { "connect", 200 }, { request = { method = "POST", url = "http://x/" } })
    assert.are.equal("success", s.verdict)
    assert.are.equal(2, s.attempts)
  end)

  it("runs prepare before each attempt, with the call's info.call", function()
    local path = write_policy([[
max_attempts = 3
backoff = { initial = 0, jitter = "none" }
function is_idempotent(request) return request.headers["Idempotency-Key"] ~= nil end
function prepare(request, attempt, info)
  info.call.key = info.call.key or ("key-" .. math.random(1, 1e9))
  request.headers["Idempotency-Key"] = info.call.key
  request.headers["X-Attempt"] = tostring(attempt)
end
]])
    finally(function() os.remove(path) end)
    local r = testing.run(path, { 503, 503, 200 }, { request = { method = "POST", url = "http://x/" } })
    assert.are.equal("success", r.verdict)
    assert.are.equal(3, r.attempts)
    local key = r.requests[1].headers["Idempotency-Key"]
    assert.matches("^key%-%d+$", key)
    for n = 1, 3 do
      assert.are.equal(key, r.requests[n].headers["Idempotency-Key"])  -- kept across attempts
      assert.are.equal(tostring(n), r.requests[n].headers["X-Attempt"])
    end
    -- another call, another key; the same seed, the same key
    local again = testing.run(path, { 200 }, { request = { method = "POST" }, seed = 2 })
    assert.are_not.equal(key, again.requests[1].headers["Idempotency-Key"])
    local same = testing.run(path, { 200 }, { request = { method = "POST" }, seed = 1 })
    assert.are.equal(key, same.requests[1].headers["Idempotency-Key"])
  end)

  it("reads Retry-After as the engine does: seconds or an HTTP-date, never earlier", function()
    local r = testing.run(HTTP, { { status = 503, headers = { ["Retry-After"] = "7" } }, 200 })
    assert.is_true(r.waits[1] >= 7, "waited " .. r.waits[1])
    assert.are.equal("server", r.decisions[1].source)
    local soon = os.date("!%a, %d %b %Y %H:%M:%S GMT", os.time() + 30)
    local d = testing.run(HTTP, { { status = 503, headers = { ["retry-after"] = soon } }, 200 })
    assert.is_true(d.waits[1] >= 28, "waited " .. d.waits[1])
    local junk = testing.run(HTTP, { { status = 503, headers = { ["Retry-After"] = "soon" } }, 200 })
    assert.are.equal("backoff", junk.decisions[1].source)
  end)
end)

describe("luaretry simulate", function()
  it("follows a wait the script chooses", function()
    local path = write_policy("max_attempts = 3\nfunction is_transient(status) return 2.5 end\n")
    finally(function() os.remove(path) end)
    local r = proc.run({ "simulate", path }, { timeout = 30 })
    assert.are.equal(0, r.code, r.stderr)
    has(r.stdout, "attempt 1: retry in 2.500 s (script)")
    has(r.stdout, "attempt 2: retry in 2.500 s (script)")
  end)

  it("exits 3 when the policy errs, naming file and line", function()
    local path = write_policy("max_attempts = 3\nfunction is_transient(status)\n  error('boom')\nend\n")
    finally(function() os.remove(path) end)
    local r = proc.run({ "simulate", path }, { timeout = 30 })
    assert.are.equal(3, r.code)
    has(r.stdout, "policy_error")
    has(r.stderr, path .. ":3: boom")
  end)
end)

describe("info", function()
  it("is read-only, and per decision: rawset cannot reach it, a field set is an error", function()
    local p = assert(lr.load_string([[
max_attempts = 3
function is_transient(status, body, info)
  if status == 1 then rawset(info, "leak", true) end
  if status == 2 then info.leak = true end
  return status == 503 and info.leak == nil
end
]], "=info"))
    local d1 = p:classify{ status = 1 }
    assert.are.equal("policy_error", d1.verdict)
    has(d1.message, "table expected")
    local d2 = p:classify{ status = 2 }
    assert.are.equal("policy_error", d2.verdict)
    has(d2.message, "info is read-only")
    assert.are.equal("retry", p:classify{ status = 503 }.verdict)  -- nothing leaked
  end)
end)
