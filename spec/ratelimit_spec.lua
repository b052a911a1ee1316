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
