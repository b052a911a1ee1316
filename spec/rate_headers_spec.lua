-- Pacing by the server's RateLimit fields (rate = { headers = true }): the
-- reader of what they say of the quota, the pacing on the virtual clock
-- (fixed seeds), and a batch against the fault server, whose quota of 4 a
-- second the fields tell (spec/fixtures/rate_headers/server.lua).
local lr = require "luaretry"
local proc = require "support.proc"

local function policy(src)
  local p, err = lr.load_string(src, "=rh")
  assert(p, err)
  return p
end

local PACED = "max_attempts = 3\ndeadline = 60\nrate = { headers = true }\n"

-- One call that gets `status` with `headers`; the decision of its first next().
local function answer(p, headers, status, seed)
  local c = assert(p:begin { virtual = true, seed = seed or 1 })
  local n = c:next()
  c:report { status = status or 200, headers = headers }
  return n
end

-- The waits the next `k` calls are told before their first attempt.
local function waits(p, k)
  local t = {}
  for i = 1, k do
    local c = assert(p:begin { virtual = true, seed = 100 + i })
    local n = c:next()
    assert.is_true(n.retry)
    t[i] = n.wait
    if n.wait > 0 then assert.are.equal("rate", n.source) end
  end
  return t
end

local function near(want, got, what)
  -- real time passes between the calls too: a little, on a busy machine
  assert.is_true(got <= want + 1e-6 and got >= want - 0.5, what .. ": " .. got .. " for " .. want)
end

describe("rate = { headers = true } on the virtual clock", function ()
  it("r = 0: no attempt until t has passed", function ()
    local p = policy(PACED)
    assert.are.equal(0, answer(p, { RateLimit = '"default";r=0;t=2' }).wait)
    for i, w in ipairs(waits(p, 4)) do near(2 * 1.02, w, "call " .. i) end
  end)

  it("r left for t seconds: spread over the t seconds, at most r in them", function ()
    local p = policy(PACED)
    answer(p, { RateLimit = '"q";r=4;t=2', ["RateLimit-Policy"] = '"q";q=10;w=2' })
    local w = waits(p, 6)
    for i = 1, 4 do near((i - 1) * 0.51, w[i], "call " .. i) end
    -- past the window the server has said nothing yet: the fifth asks again
    -- when it ends (spread over one slot of the policy's w / q = 0.2 s)
    assert.is_true(w[5] >= 2.04 - 0.5 and w[5] <= 2.04 + 0.2 + 1e-6, "call 5: " .. w[5])
  end)

  it("an answer's r counts the attempts paced after its own: answers read late agree", function ()
    local p = policy(PACED)
    -- four attempts go before any answer is read
    local calls = {}
    for i = 1, 4 do
      calls[i] = assert(p:begin { virtual = true, seed = i })
      assert.are.equal(0, calls[i]:next().wait)
    end
    -- the first attempt's answer says 3 more, but 3 went after it: the
    -- fifth asks again once the window is over (spread over a slot of
    -- t / (r + 1) = 0.25 s)
    calls[1]:report { status = 200, headers = { RateLimit = '"q";r=3;t=1' } }
    local w = waits(p, 1)[1]
    assert.is_true(w >= 1.02 - 0.5 and w <= 1.02 + 0.25 + 1e-6, "the fifth: " .. w)
  end)

  it("reads RateLimit-Remaining/-Reset and X-RateLimit-Remaining/-Reset too", function ()
    for _, h in ipairs {
      { ["RateLimit-Remaining"] = "0", ["RateLimit-Reset"] = "3" },
      { ["X-RateLimit-Remaining"] = "0", ["X-RateLimit-Reset"] = "3" },
      { ["X-RateLimit-Remaining"] = "0", ["X-RateLimit-Reset"] = tostring(os.time() + 3) },
    } do
      local p = policy(PACED)
      answer(p, h)
      local w = waits(p, 1)[1]
      assert.is_true(w > 1.5 and w <= 4.1, next(h) .. ": " .. w)
    end
  end)

  it("is off by default: the same fields pace nothing", function ()
    local p = policy("max_attempts = 3\ndeadline = 60\n")
    answer(p, { RateLimit = '"default";r=0;t=30' })
    assert.are.same({ 0, 0, 0 }, waits(p, 3))
  end)

  it("ignores bad values and a reset past max_retry_after: no wait, never an error", function ()
    for _, h in ipairs {
      { RateLimit = '"q";r=-1;t=5' }, { RateLimit = '"q";r=0;t=zz' }, { RateLimit = "garbage" },
      { RateLimit = '"q";r=0;t=99999999999999999999' }, { RateLimit = '"q";r=0;t=5000' },
      { ["X-RateLimit-Remaining"] = "lots", ["X-RateLimit-Reset"] = "5" },
      { ["X-RateLimit-Remaining"] = "0" },
    } do
      local p = policy(PACED .. "max_retry_after = 3600\n")
      answer(p, h)
      assert.are.same({ 0, 0 }, waits(p, 2), next(h) .. ": " .. tostring(select(2, next(h))))
    end
  end)

  it("a slot past the deadline ends the call at once: verdict rate_limit, naming the server's quota", function ()
    local p = policy("max_attempts = 3\ndeadline = 5\nrate = { headers = true }\n")
    answer(p, { RateLimit = '"q";r=0;t=30' })
    local c = assert(p:begin { virtual = true, seed = 9 })
    local n = c:next()
    assert.is_false(n.retry)
    assert.are.equal("rate_limit", n.verdict)
    assert.matches("the server's RateLimit quota leaves no room before the deadline", n.message)
  end)

  it("no slot in the deadline's last millisecond: the retry whose slot comes then is not made", function ()
    -- the 503's fields: no quota for 1 s; the retry after its 0.01 s
    -- backoff gets its slot at 1.02 s (t spread upward), the same each run
    -- on the call's virtual clock
    local function retry_for(deadline)
      local p = policy("max_attempts = 3\ndeadline = " .. deadline .. "\nretry_after = false\n" ..
                       "backoff = { initial = 0.01, max = 0.01, jitter = 'none' }\n" ..
                       "rate = { headers = true }\nfunction is_transient(s) return s == 503 end\n")
      local c = assert(p:begin { virtual = true, seed = 1 })
      c:next()
      local d = c:report { status = 503, headers = { RateLimit = '"q";r=0;t=1' } }
      assert.is_true(d.retry)
      c:wait(d.wait)
      return c:next()
    end
    local n = retry_for(1.022) -- the slot 2 ms before the deadline
    assert.is_true(n.retry)
    assert.are.equal("rate", n.source)
    assert.is_true(math.abs(n.elapsed + n.wait - 1.02) < 1e-6, "the slot at " .. (n.elapsed + n.wait))
    n = retry_for(1.0205) -- 0.5 ms before it
    assert.is_false(n.retry)
    assert.are.equal("rate_limit", n.verdict)
    assert.matches("the server's RateLimit quota leaves no room before the deadline", n.message)
  end)

  it("with a configured rate the stricter wins", function ()
    -- the token bucket is the stricter: 2 a second against r=100
    local p = policy("max_attempts = 3\ndeadline = 60\nrate = { limit = 2, headers = true }\n")
    answer(p, { RateLimit = '"q";r=100;t=1' })
    local w = waits(p, 3)
    near(0.5, w[1], "call 1"); near(1, w[2], "call 2"); near(1.5, w[3], "call 3")
    -- the server is the stricter: none for 2 s against 100 a second.  The
    -- quota is asked when the bucket's token comes (0.01 s on): a call is
    -- told to ask again then, and then to wait for the server's window
    p = policy("max_attempts = 3\ndeadline = 60\nrate = { limit = 100, headers = true }\n")
    answer(p, { RateLimit = '"q";r=0;t=2' })
    local c = assert(p:begin { virtual = true, seed = 7 })
    local total, asks = 0, 0
    for _ = 1, 5 do
      local n = c:next()
      assert.is_true(n.retry)
      asks = asks + 1
      if n.wait == 0 then break end
      total = total + n.wait
      c:wait(n.wait)
    end
    assert.are.equal(3, asks)
    near(2.04, total, "call 1")
  end)

  it("is a load error in any other form; rate = {} names headers among its choices", function ()
    local _, err = lr.load_string("max_attempts = 2\nrate = { headers = 'yes' }\n", "@rh.lua")
    assert.matches("rh.lua:2: rate.headers", err)
    _, err = lr.load_string("max_attempts = 2\nrate = {}\n", "@rh.lua")
    assert.matches("adaptive = true or headers = true", err)
  end)
end)

describe("rate = { headers = true } against the fault server", function ()
  local srv, dir
  proc.with_server(proc.root .. "/spec/fixtures/rate_headers/server.lua",
                   function (s, t) srv, dir = s, t end)

  -- A batch of 10 URLs on `path` at --parallel-max 4; the requests the server saw.
  local function batch(path, ...)
    local urls = {}
    for i = 1, 10 do urls[i] = srv.base .. path .. "?i=" .. i end
    proc.writefile(dir .. "/urls", table.concat(urls, "\n") .. "\n")
    local args = { "run", proc.root .. "/policies/http.lua", "--urls", dir .. "/urls",
                   "--parallel-max", "4", "--output-dir", dir, ... }
    local r = proc.run(args, { timeout = 120 })
    assert.are.equal(0, r.code, r.stderr)
    return #srv:requests_on(path), r
  end

  it("paced by the IETF fields (r=...;t=... and RateLimit-Policy), no attempt gets a 429", function ()
    local n = batch("/ietf", "--set", "rate.headers=true")
    assert.are.equal(10, n)
  end)

  it("paced by X-RateLimit-Remaining/-Reset, none either", function ()
    assert.are.equal(10, batch("/legacy", "--set", "rate.headers=true"))
  end)

  it("without it the same batch gets 429s (and retries them)", function ()
    assert.is_true(batch("/ietf") > 10)
  end)

  it("with a limit too: the quota asked when the bucket's token comes; no 429", function ()
    local n, r = batch("/ietf", "--set", "rate.headers=true", "--set", "rate.limit=50")
    assert.are.equal(10, n, r.stderr)
  end)

  it("with the fleet's fixed rate too: the token first, then the quota; no 429", function ()
    local rd = require("support.redis").start()
    finally(function () rd:stop() end)
    -- a fixed rate: http.lua's own is adaptive (rate.limit its ceiling), the process's
    local n, r = batch("/ietf", "--set", "rate.headers=true", "--set", "rate.limit=50",
                       "--set", "rate.adaptive=false", "--redis", rd.url, "-v",
                       table.unpack(require("support.fleet").PATIENT))
    assert.are.equal(10, n, r.stderr)
    assert.matches(":rate", rd:cli("KEYS", "*"))      -- the fleet's bucket was asked
    assert.not_matches("falls back", r.stderr)
  end)

  it("fields it cannot read, or a reset past max_retry_after, are ignored: -v says so", function ()
    local n, r = batch("/garbage", "--set", "rate.headers=true", "-v")
    assert.is_true(n >= 10)
    assert.matches("RateLimit fields ignored", r.stderr)
    local _, r2 = batch("/far", "--set", "rate.headers=true", "-v", "--set", "max_retry_after=60")
    assert.is_true(r2.secs < 60, "it waited for the reset: " .. r2.secs)
    assert.matches("RateLimit fields ignored", r2.stderr)
  end)
end)
