-- Rate-limit fields (the IETF RateLimit field, X-RateLimit-Remaining with
-- X-RateLimit-Reset): the engine's reader as the module and the scripts
-- see it (luaretry.rate_limit, info.rate_limit, info.retry_after), and a
-- wait a script returns as a table ({wait =, jitter =, server =}).
local lr = require "luaretry"

local NOW = 1700000000

local function load(src)
  local p, err = lr.load_string(src, "=ratelimit_spec")
  assert(p, err)
  return p
end

describe("luaretry.rate_limit", function()
  it("reads the IETF RateLimit field: the first spent quota's t", function()
    assert.are.equal(30, lr.rate_limit({ RateLimit = '"default";r=0;t=30' }, NOW))
    assert.are.equal(12, lr.rate_limit({ ratelimit = '"day";r=9;t=3600, "min";r=0;t=12' }, NOW))
    assert.is_nil(lr.rate_limit({ ratelimit = '"default";r=3;t=30' }, NOW))
  end)

  it("reads X-RateLimit-Remaining: 0 with a reset in epoch or delta seconds", function()
    local h = { ["X-RateLimit-Remaining"] = "0", ["X-RateLimit-Reset"] = tostring(NOW + 90) }
    assert.are.equal(90, lr.rate_limit(h, NOW))
    assert.are.equal(45, lr.rate_limit({ ["x-ratelimit-remaining"] = "0",
                                         ["x-ratelimit-reset"] = "45" }, NOW))
    assert.is_nil(lr.rate_limit({ ["x-ratelimit-remaining"] = "1",
                                  ["x-ratelimit-reset"] = "45" }, NOW))
  end)

  it("takes the first valid of several values", function()
    assert.are.equal(20, lr.rate_limit({ ["x-ratelimit-remaining"] = { "none", "0", "5" },
                                         ["x-ratelimit-reset"] = { "-1", "20", "30" } }, NOW))
  end)

  it("ignores malformed values: nil, never an error", function()
    for _, reset in ipairs { "-5", "soon", "1e3", "99999999999999999", tostring(NOW - 1),
                             tostring(NOW + 2e9), "" } do
      assert.is_nil(lr.rate_limit({ ["x-ratelimit-remaining"] = "0",
                                    ["x-ratelimit-reset"] = reset }, NOW), reset)
    end
    for _, field in ipairs { '"a";r=0', '"a";r=0;t=-1', '"a";r=0;t=1.5', '"a', ";;,,", "" } do
      assert.is_nil(lr.rate_limit({ ratelimit = field }, NOW), field)
    end
  end)
end)

describe("info.rate_limit and info.retry_after", function()
  local p = load [[
max_attempts = 3
function is_transient(status, body, info)
  error(string.format("rate_limit=%s retry_after=%s", tostring(info.rate_limit),
                      tostring(info.retry_after)), 0)
end
]]

  it("give the engine's readings to the script", function()
    local d = p:classify { status = 429, retry_after = 4,
                           headers = { RateLimit = '"default";r=0;t=30' } }
    assert.matches("rate_limit=30.0 retry_after=4.0", d.message, 1, true)
  end)

  it("are nil when the server says nothing", function()
    local d = p:classify { status = 429, headers = { ["x-ratelimit-remaining"] = "7" } }
    assert.matches("rate_limit=nil retry_after=nil", d.message, 1, true)
  end)
end)

describe("a wait returned as a table", function()
  local function policy(ret, extra)
    return load(([[
max_attempts = 5
max_retry_after = 60
backoff = { initial = 1, multiplier = 1, max = 1, jitter = "additive", jitter_max = 2 }
%s
function is_transient(status, body, info) return %s end
]]):format(extra or "", ret))
  end

  it("{wait = W} is exactly W, as a number is", function()
    local d = policy("{ wait = 5 }"):classify { status = 503 }
    assert.are.equal("retry", d.verdict)
    assert.are.equal(5, d.wait)
    assert.are.equal("script", d.source)
  end)

  it("{wait = W, jitter = true} spreads W upward by the policy's jitter", function()
    local p = policy("{ wait = 5, jitter = true }")
    local seen = {}
    for seed = 1, 20 do
      local c = p:begin { virtual = true, seed = seed }
      local d = c:report { status = 503 }
      assert.are.equal("script", d.source)
      assert.is_true(d.wait >= 5 and d.wait <= 7, tostring(d.wait))
      seen[d.wait] = true
    end
    local n = 0
    for _ in pairs(seen) do n = n + 1 end
    assert.is_true(n > 10, "the waits differ from seed to seed")
  end)

  it("jitter = \"none\" gives no spread", function()
    local p = load [[
max_attempts = 5
backoff = { initial = 1, jitter = "none" }
function is_transient() return { wait = 5, jitter = true } end
]]
    assert.are.equal(5, p:classify { status = 503 }.wait)
  end)

  it("{wait = W, server = true} counts as a Retry-After: W plus jitter, never less", function()
    local p = policy("{ wait = 10, server = true }")
    for seed = 1, 10 do
      local d = p:begin({ virtual = true, seed = seed }):report { status = 429 }
      assert.are.equal("server", d.source)
      assert.is_true(d.wait >= 10 and d.wait <= 12, tostring(d.wait))
    end
  end)

  it("a server wait past max_retry_after stops with server_wait_too_long", function()
    local d = policy("{ wait = 61, server = true }"):classify { status = 429 }
    assert.are.equal("server_wait_too_long", d.verdict)
    assert.matches("61", d.message)
  end)

  it("of a server wait and a Retry-After the longer counts", function()
    local d = policy("{ wait = 3, server = true }"):classify { status = 429, retry_after = 20 }
    assert.is_true(d.wait >= 20 and d.wait <= 22)
    d = policy("{ wait = 30, server = true }"):classify { status = 429, retry_after = 20 }
    assert.is_true(d.wait >= 30 and d.wait <= 32)
  end)

  it("retry_after = false ignores a server wait: the backoff applies", function()
    local d = policy("{ wait = 30, server = true }", "retry_after = false"):classify { status = 429 }
    assert.are.equal("retry", d.verdict)
    assert.is_true(d.wait <= 3)
  end)

  it("anything else in the table is a policy error naming it", function()
    for ret, says in pairs {
      ["{ wait = 5, jiter = true }"] = "field jiter",
      ["{ wait = -1 }"] = "without a valid wait",
      ["{ jitter = true }"] = "without a valid wait",
      ["{ wait = 0/0 }"] = "without a valid wait",
      ["{ wait = '5' }"] = "field wait",
      ["{ wait = 5, server = 1 }"] = "field server",
      ["{ 5 }"] = "a key that is not a name",
    } do
      local d = policy(ret):classify { status = 503 }
      assert.are.equal("policy_error", d.verdict, ret)
      assert.matches(says, d.message, 1, true)
      assert.matches("ratelimit_spec:5", d.message, 1, true)
    end
  end)
end)

-- ------------------------------------------------- the http policy, for real

local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
package.path = here .. "/?.lua;" .. here .. "/../lua/?.lua;" .. package.path
local proc = require "support.proc"
local HTTP = proc.root .. "/policies/http.lua"
-- a short backoff, so that a server's wait is what decides
local QUICK = { "--set", "backoff.initial=0.1", "--set", "backoff.jitter_max=0.1",
                "--set", "throttle_backoff.initial=0.1" }

local function run(srv, path, extra)
  local args = { "run", HTTP, srv.base .. path, "--log-json", "-", "-s" }
  for _, a in ipairs(QUICK) do args[#args + 1] = a end
  for _, a in ipairs(extra or {}) do args[#args + 1] = a end
  local r = proc.run(args, { timeout = 30 })
  r.log = {}
  for _, line in ipairs(proc.lines(r.stderr)) do
    if line:sub(1, 1) == "{" then r.log[#r.log + 1] = proc.json.decode(line) end
  end
  return r
end

describe("policies/http.lua against luaretry faults", function()
  local srv
  setup(function() srv = proc.server(here .. "/fixtures/faults/ratelimit.lua") end)
  teardown(function() if srv then srv:stop() end end)

  -- a 429/503/403 whose headers say when the quota is back: that long, plus
  -- at most jitter_max, as the server's wait
  local function waits_for_reset(path, lo, hi)
    local r = run(srv, path)
    assert.are.equal(0, r.code, r.stderr)
    local first = r.log[1]
    assert.are.equal("retry", first.verdict)
    assert.are.equal("server", first.wait_source, r.stderr)
    assert.is_true(first.wait >= lo and first.wait <= hi, tostring(first.wait))
    assert.matches("policies/http%.lua:%d+$", first.rule)
    assert.are.equal("success", r.log[2].verdict)
    assert.is_true(r.log[2].elapsed >= lo, "never earlier than the reset")
  end

  it("waits out the IETF RateLimit field on a 429", function() waits_for_reset("/ietf", 1, 1.1) end)
  it("and on a 503 (the first spent quota counts)", function() waits_for_reset("/ietf503", 1, 1.1) end)
  it("waits out X-RateLimit-Reset in delta seconds", function() waits_for_reset("/xdelta", 1, 1.1) end)
  it("waits out X-RateLimit-Reset in epoch seconds", function() waits_for_reset("/xepoch", 0.5, 3.2) end)
  it("retries a 403 that says the quota is spent", function() waits_for_reset("/quota403", 1, 1.1) end)
  it("retries a 403 with a Retry-After", function() waits_for_reset("/after403", 1, 1.1) end)

  it("keeps any other 403 final", function()
    local r = run(srv, "/plain403")
    assert.are.equal(1, r.code, r.stderr)
    assert.are.equal("final", r.log[1].verdict)
    assert.are.equal(1, #srv:requests_on("/plain403"))
  end)

  it("spreads the wait: clients told the same reset do not all come back at it", function()
    local seen = {}
    for seed = 1, 4 do
      local r = run(srv, "/ietf", { "--seed", tostring(seed) })
      assert.are.equal(0, r.code, r.stderr)
      seen[#seen + 1] = r.log[1].wait
      srv:reset()
    end
    table.sort(seen)
    assert.is_true(seen[#seen] - seen[1] > 0.01, table.concat(seen, " "))
  end)

  it("stops with server_wait_too_long (exit 5) when the reset is past max_retry_after", function()
    local r = run(srv, "/far")
    assert.are.equal(5, r.code, r.stderr)
    assert.are.equal("server_wait_too_long", r.log[1].verdict)
    assert.are.equal("max_retry_after", r.log[1].rule)
    local q = run(srv, "/ietf", { "--set", "max_retry_after=0.5" })
    assert.are.equal(5, q.code, q.stderr)
    assert.matches("asked for 1%.000 s, more than max_retry_after %(0%.500 s%)", q.log[1].message)
  end)

  it("ignores malformed values: the backoff applies (a 429's: throttling's)", function()
    -- the adaptive rate off: after a 429 its own pacing may ask for longer
    local r = run(srv, "/garbage", { "--set", "rate=none" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("throttle", r.log[1].wait_source)
    assert.is_true(r.log[1].wait < 0.25)
    -- with it, the wait is still none of the malformed fields'
    srv:reset()
    r = run(srv, "/garbage")
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.log[1].wait_source == "throttle" or r.log[1].wait_source == "rate",
                  r.log[1].wait_source)
    assert.is_true(r.log[1].wait < 1)
  end)
end)

describe("policies/http.lua: POST and PATCH with an Idempotency-Key", function()
  local srv
  before_each(function() srv = proc.server(here .. "/fixtures/faults/ratelimit.lua") end)
  after_each(function() if srv then srv:stop() end end)

  it("a POST without the key stays final after it may have taken effect", function()
    local r = run(srv, "/busy", { "-d", "order=1" })
    assert.are.equal(1, r.code, r.stderr)
    assert.are.equal("final", r.log[1].verdict)
    assert.are.equal("idempotency", r.log[1].rule)
    assert.are.equal(1, #srv:requests_on("/busy"))
  end)

  for _, method in ipairs { "POST", "PATCH" } do
    it(method .. " with the key is retried, with the same key on every attempt", function()
      local r = run(srv, "/busy", { "-X", method, "-d", "order=1", "-H", "Idempotency-Key: k-7f3a" })
      assert.are.equal(0, r.code, r.stderr)
      local seen = srv:requests_on("/busy")
      assert.are.equal(2, #seen)
      for _, req in ipairs(seen) do
        assert.are.equal(method, req.method)
        assert.are.equal("k-7f3a", req.headers["idempotency-key"])
      end
    end)
  end

  it("--set options.idempotent_methods names more methods to retry", function()
    local r = run(srv, "/busy", { "-d", "x", "--set", "options.idempotent_methods=LOCK, post" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(2, #srv:requests_on("/busy"))
    srv:reset()
    local q = run(srv, "/busy", { "-X", "LOCK" })
    assert.are.equal(1, q.code, q.stderr)   -- not listed by default
    srv:reset()
    q = run(srv, "/busy", { "-X", "LOCK", "--set", "options.idempotent_methods=LOCK" })
    assert.are.equal(0, q.code, q.stderr)
  end)
end)

describe("a final verdict's reason", function()
  local srv, dir
  setup(function()
    srv = proc.server(here .. "/fixtures/faults/ratelimit.lua")
    dir = proc.tmpdir()
  end)
  teardown(function()
    if srv then srv:stop() end
    if dir then proc.rmtree(dir) end
  end)

  it("reaches the attempt line and --log-json's message", function()
    proc.writefile(dir .. "/why.lua", [[
max_attempts = 3
deadline = 10
attempt_timeout = 5
function is_transient(status, body, info)
  if status == 403 then return false, "forbidden: the token lacks orders.write" end
  return status >= 500, "ignored when the verdict is true"
end
]])
    local r = proc.run({ "run", dir .. "/why.lua", srv.base .. "/plain403", "--log-json", "-" },
                       { timeout = 30 })
    assert.are.equal(1, r.code, r.stderr)
    assert.truthy(r.stderr:find("403 -> final (" .. dir .. "/why.lua:4): forbidden: the token " ..
                                "lacks orders.write", 1, true), r.stderr)
    local first = proc.json.decode(proc.lines(r.stderr)[1])
    assert.are.equal("forbidden: the token lacks orders.write", first.message)
    local p = assert(lr.load(dir .. "/why.lua"))
    assert.is_nil(p:classify { status = 503 }.message)   -- only a final verdict says why
    assert.are.equal("ignored when the verdict is true", p:classify { status = 400 }.message)
  end)
end)

describe("the shipped policies' rate-limit and hint waits", function()
  local testing = require "testing"
  local function policy(name) return proc.root .. "/policies/" .. name .. ".lua" end

  it("gcs, iam and memorystore wait out a 429's rate-limit reset as the server's wait", function()
    for _, name in ipairs { "gcs", "iam", "memorystore" } do
      local d = testing.classify(policy(name), { status = 429, headers = { RateLimit = '"q";r=0;t=40' } })
      assert.are.equal("server", d.source, name)
      assert.is_true(d.wait >= 40 and d.wait <= 41, name .. " " .. d.wait)
      assert.are.equal("throttle", testing.classify(policy(name), 429).source, name)
    end
  end)

  it("the azure policies wait out a 429's reset, and spread a millisecond hint", function()
    for _, name in ipairs { "azure", "azure-batch" } do
      local d = testing.classify(policy(name), { status = 429, headers = {
        ["x-ratelimit-remaining"] = "0", ["x-ratelimit-reset"] = "45" } })
      assert.are.equal("server", d.source, name)
      assert.is_true(d.wait >= 45 and d.wait <= 46, name)
      local waits = {}
      for seed = 1, 5 do
        local r = testing.run(policy(name), { { status = 503, headers = { ["retry-after-ms"] = "1500" } },
                                              200 }, { seed = seed })
        assert.are.equal("script", r.decisions[1].source)
        assert.is_true(r.waits[1] >= 1.5 and r.waits[1] <= 2.5)
        waits[#waits + 1] = r.waits[1]
      end
      table.sort(waits)
      assert.is_true(waits[5] > waits[1], name .. ": the hint is spread")
    end
  end)
end)
