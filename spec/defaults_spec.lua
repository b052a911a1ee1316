-- The guards the shipped policies turn on (luaretry-policy(5), GUARDS ON BY
-- DEFAULT): a lone call still makes all its attempts, a batch in an outage
-- cannot multiply it, and `--set GUARD=none` turns each guard off.  The
-- real build/luaretry against the fault server on 127.0.0.1, stopped by
-- its PID; the backoff shortened so that a call lasts a second or two.
local lr = require "luaretry"
local proc = require "support.proc"

local HTTP = proc.root .. "/policies/http.lua"
local DIR = proc.root .. "/spec/fixtures/batch/"
-- waits of 0.05 to 0.2 s, jitter at most 0.05 s: 10 attempts within ~2 s
local SHORT = { "--set", "backoff.initial=0.05", "--set", "backoff.max=0.2",
                "--set", "backoff.jitter_max=0.05", "--seed", "1" }

local concat = proc.concat

local function settings(policy, ...)
  local r = proc.run(concat({ "check", policy }, { ... }), { timeout = 30 })
  return r.stdout:match("settings: ([^\n]*)") or "", r
end

describe("the shipped policies' guards", function ()
  local srv, tmp
  proc.with_server(DIR .. "server.lua", function (s, t) srv, tmp = s, t end)

  local function url_file(n)
    local lines = {}
    for i = 1, n do lines[i] = srv.base .. "/always503/" .. i end
    local path = tmp .. "/urls.txt"
    proc.writefile(path, table.concat(lines, "\n") .. "\n")
    return path
  end

  it("a lone call against always-503 makes all its 10 attempts", function ()
    local r = proc.run(concat({ "run", HTTP, srv.base .. "/always503/1" }, SHORT), { timeout = 60 })
    assert.are.equal(4, r.code, r.stderr)   -- exhausted, not refused (6)
    assert.are.equal(10, #srv:requests())
    assert.matches("attempt 10/10: 503 %-> exhausted", r.stderr)
    -- the floor is what lets it: without it the budget stops it after 5
    srv:reset()
    r = proc.run(concat({ "run", HTTP, srv.base .. "/always503/1", "--set", "budget.reserve=0" },
                        SHORT), { timeout = 60 })
    assert.are.equal(6, r.code, r.stderr)
    assert.are.equal(5, #srv:requests())
  end)

  it("a batch in an outage stays under 1.3 requests per URL (--set budget=none: 10)", function ()
    local t0 = proc.now()
    local r = proc.run(concat({ "run", HTTP, "--parallel-max", "20", "-q", "--urls", url_file(200) },
                              SHORT), { timeout = 120 })
    local secs = proc.now() - t0
    assert.are.equal(6, r.code, r.stderr)   -- the budget refused
    local seen = #srv:requests()
    -- 200 first attempts, 4 retries from the tokens, 5 from the reserve held
    -- at once, 0.1 a second while the batch lasted
    assert.is_true(seen >= 200, seen .. " requests")
    assert.is_true(seen <= 200 + 9 + math.ceil(0.1 * secs), seen .. " requests in " .. secs .. " s")
    assert.is_true(seen <= 1.3 * 200, seen .. " requests")
    srv:reset()
    r = proc.run(concat({ "run", HTTP, "--parallel-max", "20", "-q", "--urls", url_file(20),
                          "--set", "budget=none" }, SHORT), { timeout = 120 })
    assert.are.equal(4, r.code, r.stderr)   -- every call exhausted its attempts
    assert.are.equal(200, #srv:requests())
  end)

  it("--set max_attempts=6 with budget=none makes exactly 6 attempts, as curl's --retry 5", function ()
    local r = proc.run(concat({ "run", HTTP, "--parallel-max", "4", "-q", "--urls", url_file(8),
                                "--set", "budget=none", "--set", "max_attempts=6" }, SHORT),
                       { timeout = 120 })
    assert.are.equal(4, r.code, r.stderr)
    assert.are.equal(48, #srv:requests())
  end)
end)

describe("the model of a fleet (simulate --fleet) with http.lua's guards", function ()
  it("100 processes sharing them send at most 1.1 per first attempt; the reserve is the fleet's", function ()
    local function model(...)
      local r = proc.run({ "simulate", HTTP, "--clients", "100", "--fleet", "--json", ... },
                         { timeout = 60 })
      assert.are.equal(0, r.code, r.stderr)
      return proc.json.decode(r.stdout)
    end
    local m = model()
    -- 100 first attempts, the tokens' 4 retries, the fleet's one reserve of 5
    assert.are.equal(109, m.fleet.attempts)
    assert.is_true(m.fleet.amplification <= 1.1)
    assert.are.equal(0, m.fleet.stops.success or 0)
    -- each process its own: every one makes its attempts through the 30 s outage
    assert.are.equal(100, m.own.stops.success)
    assert.are.equal(104, model("--set", "budget.reserve=0").fleet.attempts)
  end)
end)

describe("--set GUARD=none", function ()
  it("turns each guard off, whatever the script declares", function ()
    local src = proc.tmpdir()
    finally(function () proc.rmtree(src) end)
    local path = src .. "/all.lua"
    proc.writefile(path, [[
max_attempts = 3
deadline = 10
budget = { max_tokens = 10, reserve = 0.1 }
breaker = { failures = 5 }
admission = { k = 2 }
rate = { adaptive = true }
hedge = { delay = 0.5 }
]])
    local on = settings(path)
    for _, f in ipairs { "budget.max_tokens=10", "budget.reserve=0.1", "breaker.failures=5",
                         "admission.k=2", "rate.adaptive=true", "hedge.delay=0.5" } do
      assert.truthy(on:find(f, 1, true), f .. " in " .. on)
    end
    for guard, field in pairs { budget = "budget.max_tokens", breaker = "breaker.failures",
                                admission = "admission.k", rate = "rate.adaptive",
                                hedge = "hedge.delay" } do
      local off = settings(path, "--set", guard .. "=none")
      assert.truthy(off:find(field .. "=none", 1, true), guard .. "=none: " .. off)
      -- the others stay on
      assert.truthy(off:find(guard == "budget" and "breaker.failures=5" or "budget.max_tokens=10",
                             1, true), off)
    end
  end)

  it("and through luaretry_policy_set: the budget's refusal is gone", function ()
    local p = assert(lr.load_string([[
max_attempts = 10
backoff = { initial = 0, jitter = "none" }
budget = { max_tokens = 10, token_ratio = 0.1 }
]], "=off"))
    local function attempts()
      local c = assert(p:begin { virtual = true, seed = 1 })
      c:next()
      for i = 1, 20 do
        local d = c:report { status = 503 }
        if not d.retry then return i, d.verdict end
        c:wait(d.wait)
      end
    end
    local n, verdict = attempts()
    assert.are.same({ 5, "budget" }, { n, verdict })
    assert.is_true(p:set("budget", "none"))
    n, verdict = attempts()
    assert.are.same({ 10, "exhausted" }, { n, verdict })
  end)

  it("any other value for a guard is an error naming it", function ()
    for _, guard in ipairs { "budget", "breaker", "admission", "rate", "hedge" } do
      local _, r = settings(HTTP, "--set", guard .. "=nonsense")
      assert.are_not.equal(0, r.code)
      assert.matches(guard .. ": expected none %(turns it off%), got \"nonsense\"", r.stdout .. r.stderr)
    end
    local p = assert(lr.load(HTTP))
    local ok, err = p:set("budget", "off")
    assert.is_falsy(ok)
    assert.matches("budget: expected none", err)
  end)
end)

describe("the shipped policies", function ()
  local HTTP_POLICIES = { "http", "gcs", "iam", "memorystore", "azure", "azure-interactive",
                          "azure-batch" }

  it("each has a budget with its floor and an adaptive rate; a single call is never refused", function ()
    for _, name in ipairs(HTTP_POLICIES) do
      local path = proc.root .. "/policies/" .. name .. ".lua"
      local s = settings(path)
      assert.truthy(s:find("budget.reserve=0.1", 1, true), name .. ": " .. s)
      -- a limiter's 429s, paced by the rate, cost what a success gives back
      assert.truthy(s:find("budget.throttle_cost=0.1 ", 1, true), name .. ": " .. s)
      assert.truthy(s:find("rate.adaptive=true", 1, true), name .. ": " .. s)
      -- a breaker, where there is one, opens only past what one call can fail
      local attempts = tonumber(s:match("max_attempts=(%d+)"))
      local failures = tonumber(s:match("breaker.failures=(%d+)"))
      if failures then assert.is_true(attempts and failures > attempts, name) end
      -- the lone call, on the virtual clock with the policy's own waits: it
      -- ends by its attempts or its deadline, never refused; with
      -- max_attempts, with no wait between them too
      local function lone(p)
        local c = assert(p:begin { virtual = true, seed = 1 })
        c:next()
        local d, n
        for i = 1, 1000 do
          d, n = c:report { status = 500 }, i
          if not d.retry then break end
          c:wait(d.wait)
        end
        return d, n
      end
      local p = assert(lr.load(path))
      local d, n = lone(p)
      if attempts then
        assert.are.same({ "exhausted", attempts }, { d.verdict, n }, name .. ": " .. tostring(d.message))
        p = assert(lr.load(path))
        assert.is_true(p:set("backoff.initial", "0"))
        d, n = lone(p)
        assert.are.same({ "exhausted", attempts }, { d.verdict, n }, name .. ": " .. tostring(d.message))
      else
        assert.are.equal("deadline", d.verdict, name .. ": " .. tostring(d.message))
      end
    end
  end)
end)
