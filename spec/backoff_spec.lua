-- The backoff arithmetic (README: "The arithmetic"), drawn through the engine's
-- own code with p:sample and p:schedule.
local lr = require "luaretry"

local function lit(v)
  if type(v) == "string" then return string.format("%q", v) end
  if math.type(v) == "float" then return string.format("%a", v) end
  return tostring(v)
end

-- A policy whose backoff table is `b`; fails the test when it does not load.
local function policy(b, extra)
  local parts = {}
  for k, v in pairs(b) do parts[#parts + 1] = k .. " = " .. lit(v) end
  local src = "max_attempts = 100\nattempt_timeout = 30\nbackoff = { " .. table.concat(parts, ", ") .. " }\n"
              .. (extra or "")
  local p, err = lr.load_string(src, "=backoff_spec")
  assert(p, err)
  return p
end

local function one(p, n, seed, previous)
  return p:sample{ n = n, count = 1, seed = seed or 1, previous = previous }[1]
end

local function stats(list)
  local lo, hi, sum = math.huge, -math.huge, 0
  for _, w in ipairs(list) do
    if w < lo then lo = w end
    if w > hi then hi = w end
    sum = sum + w
  end
  return lo, hi, sum / #list
end

local DOC = { 1, 2, 4, 8, 16, 32, 32, 32, 32, 32 }
local HUGE_N = { 31, 63, 64, 1024, 1025, 1000000, 2147483647 }

describe("the documented schedule", function()
  local doc = { initial = 1, multiplier = 2, max = 32, jitter = "none" }

  it("waits exactly 1, 2, 4, ... 32 then 32 for retries 0..9 (sample)", function()
    local p = policy(doc)
    for n = 0, 9 do
      for _, seed in ipairs{ 1, 2, 99 } do
        assert.are.equal(DOC[n + 1], one(p, n, seed))
      end
    end
  end)

  it("gives the same waits through p:schedule with 11 attempts", function()
    local p = policy(doc)
    local s = p:schedule{ seed = 5, attempts = 11 }
    assert.are.equal(11, #s)
    for n = 0, 9 do
      local d = s[n + 1]
      assert.is_true(d.retry)
      assert.are.equal("retry", d.verdict)
      assert.are.equal(n + 1, d.attempt)
      assert.are.equal(DOC[n + 1], d.wait)
      -- the cap decides from retry 6 on (d = 64 > 32)
      assert.are.equal(n >= 6 and "clamped" or "backoff", d.source)
    end
    assert.is_false(s[11].retry)
    assert.are.equal("exhausted", s[11].verdict)
    assert.are.equal(0, s[11].wait)
    assert.are.equal(191, s[11].elapsed) -- 1+2+4+8+16+32*5 on the virtual clock
  end)

  it("with additive jitter, cap_jitter = false: each wait in [min(2^n,32), min(2^n,32)+1]",
    function()
      local p = policy{ initial = 1, multiplier = 2, max = 32, jitter = "additive",
                        jitter_max = 1, cap_jitter = false }
      local above_cap = 0
      for seed = 1, 300 do
        local s = p:schedule{ seed = seed, attempts = 11 }
        for n = 0, 9 do
          local v = math.min(2 ^ n, 32)
          local w = s[n + 1].wait
          assert.is_true(w >= v and w <= v + 1, ("seed %d n %d: %s"):format(seed, n, w))
          if w > 32 then above_cap = above_cap + 1 end
        end
      end
      -- jitter keeps spreading clients once capped
      assert.is_true(above_cap > 1000)
    end)

  it("with additive jitter, cap_jitter = true: each wait in [min(2^n,32), 32]", function()
    local p = policy{ initial = 1, multiplier = 2, max = 32, jitter = "additive",
                      jitter_max = 1, cap_jitter = true }
    for seed = 1, 300 do
      local s = p:schedule{ seed = seed, attempts = 11 }
      for n = 0, 9 do
        local v = math.min(2 ^ n, 32)
        local w = s[n + 1].wait
        assert.is_true(w >= v and w <= 32, ("seed %d n %d: %s"):format(seed, n, w))
        if n >= 5 then assert.are.equal(32, w) end
        if n <= 4 then assert.is_true(w <= v + 1) end
      end
    end
  end)

  it("is the same for the same seed and differs between seeds", function()
    local p = policy{ initial = 1, multiplier = 2, max = 32, jitter = "additive" }
    local function waits(seed)
      local out = {}
      for i, d in ipairs(p:schedule{ seed = seed, attempts = 11 }) do out[i] = d.wait end
      return out
    end
    assert.are.same(waits(42), waits(42))
    assert.are.same(p:sample{ n = 3, count = 50, seed = 7 }, p:sample{ n = 3, count = 50, seed = 7 })
    local a, b = waits(42), waits(43)
    local differ = 0
    for i = 1, 10 do if a[i] ~= b[i] then differ = differ + 1 end end
    assert.is_true(differ >= 9)
    assert.are_not.same(p:sample{ n = 3, count = 50, seed = 7 }, p:sample{ n = 3, count = 50, seed = 8 })
  end)
end)

describe("jitter over 100,000 draws", function()
  local N = 100000

  local function within_1pct(mean, expected)
    assert.is_true(math.abs(mean - expected) <= 0.01 * expected,
      ("mean %.6f, expected %.6f"):format(mean, expected))
  end

  it("none: always exactly v", function()
    local p = policy{ initial = 1, multiplier = 2, max = 32, jitter = "none" }
    local lo, hi = stats(p:sample{ n = 3, count = N, seed = 3 })
    assert.are.equal(8, lo)
    assert.are.equal(8, hi)
  end)

  it("additive: within [v, v + jitter_max], mean v + jitter_max/2", function()
    local p = policy{ initial = 1, multiplier = 2, max = 32, jitter = "additive",
                      jitter_max = 2, cap_jitter = false }
    local lo, hi, mean = stats(p:sample{ n = 2, count = N, seed = 11 })
    assert.is_true(lo >= 4 and hi <= 6)
    assert.is_true(lo < 4.01 and hi > 5.99) -- the whole range is used
    within_1pct(mean, 4 + 2 / 2)
  end)

  it("full: within [0, v], mean v/2", function()
    local p = policy{ initial = 1, multiplier = 2, max = 32, jitter = "full" }
    local lo, hi, mean = stats(p:sample{ n = 5, count = N, seed = 12 })
    assert.is_true(lo >= 0 and hi <= 32)
    assert.is_true(lo < 0.1 and hi > 31.9)
    within_1pct(mean, 32 / 2)
  end)

  it("full: capped v at a huge retry", function()
    local p = policy{ initial = 1, multiplier = 2, max = 32, jitter = "full" }
    local lo, hi, mean = stats(p:sample{ n = 1000000, count = N, seed = 13 })
    assert.is_true(lo >= 0 and hi <= 32)
    within_1pct(mean, 16)
  end)

  it("equal: within [v/2, v], mean 3v/4", function()
    local p = policy{ initial = 1, multiplier = 2, max = 32, jitter = "equal" }
    local lo, hi, mean = stats(p:sample{ n = 3, count = N, seed = 14 })
    assert.is_true(lo >= 4 and hi <= 8)
    assert.is_true(lo < 4.01 and hi > 7.99)
    within_1pct(mean, 3 * 8 / 4)
  end)

  it("decorrelated, cap not hit: uniform [initial, 3 * previous]", function()
    local p = policy{ initial = 1, multiplier = 2, max = 100, jitter = "decorrelated" }
    local lo, hi, mean = stats(p:sample{ n = 4, count = N, seed = 15, previous = 5 })
    assert.is_true(lo >= 1 and hi <= 15)
    assert.is_true(lo < 1.01 and hi > 14.99)
    within_1pct(mean, (1 + 15) / 2)
  end)

  it("decorrelated, cap hit: min(max, uniform [initial, 3 * previous])", function()
    local a, b, m = 1, 15, 10
    local p = policy{ initial = a, multiplier = 2, max = m, jitter = "decorrelated" }
    local draws = p:sample{ n = 0, count = N, seed = 16, previous = 5 }
    local lo, hi, mean = stats(draws)
    assert.is_true(lo >= a and hi <= m)
    local at_cap = 0
    for _, w in ipairs(draws) do if w == m then at_cap = at_cap + 1 end end
    -- P(u >= m) = (b - m) / (b - a)
    assert.is_true(math.abs(at_cap / N - (b - m) / (b - a)) < 0.01)
    -- E[min(u, m)] = (m^2 - a^2) / (2 (b - a)) + m (b - m) / (b - a)
    within_1pct(mean, (m * m - a * a) / (2 * (b - a)) + m * (b - m) / (b - a))
  end)

  it("decorrelated: previous starts at initial and follows the waits", function()
    local p = policy{ initial = 2, max = 1000, jitter = "decorrelated" }
    for seed = 1, 50 do
      local s = p:schedule{ seed = seed, attempts = 8 }
      local previous = 2
      for i = 1, 7 do
        local w = s[i].wait
        assert.is_true(w >= 2 and w <= 3 * previous, ("seed %d retry %d"):format(seed, i - 1))
        previous = w
      end
    end
  end)
end)

describe("no overflow at huge retry numbers", function()
  local function finite_positive(w)
    return w == w and w > 0 and w < math.huge
  end

  for _, mult in ipairs{ 2, 10 } do
    it("multiplier " .. mult .. ": exactly the cap", function()
      local p = policy{ initial = 1, multiplier = mult, max = 32, jitter = "none" }
      for _, n in ipairs(HUGE_N) do
        local w = one(p, n)
        assert.is_true(finite_positive(w))
        assert.are.equal(32, w, "n = " .. n)
      end
    end)
  end

  for _, mult in ipairs{ 0.5, 0 } do
    it("multiplier " .. mult .. " is clamped to 1, with a warning", function()
      local p = policy{ initial = 2, multiplier = mult, max = 32, jitter = "none" }
      assert.are.equal(1, p:tuning().backoff.multiplier)
      local w = table.concat(p:warnings(), "\n")
      assert.matches("backoff.multiplier", w, 1, true)
      assert.matches("clamped to 1", w, 1, true)
      for _, n in ipairs(HUGE_N) do
        assert.are.equal(2, one(p, n), "n = " .. n)
      end
      for n = 0, 5 do assert.are.equal(2, one(p, n)) end
    end)
  end

  it("multiplier 1: exactly min(initial, max), no clamp warning", function()
    local p = policy{ initial = 2, multiplier = 1, max = 32, jitter = "none" }
    assert.are.equal(0, #p:warnings())
    for _, n in ipairs(HUGE_N) do assert.are.equal(2, one(p, n)) end
  end)

  it("initial == max: exactly the cap for multipliers 0.5, 1, 2 and 10", function()
    for _, mult in ipairs{ 0.5, 1, 2, 10 } do
      local p = policy{ initial = 8, multiplier = mult, max = 8, jitter = "none" }
      for _, n in ipairs(HUGE_N) do
        assert.are.equal(8, one(p, n), ("multiplier %s n %d"):format(mult, n))
      end
      assert.are.equal(8, one(p, 0))
    end
  end)

  it("with additive jitter, a huge retry waits within [max, max + jitter_max]", function()
    local p = policy{ initial = 1, multiplier = 2, max = 32, jitter = "additive" }
    for _, n in ipairs(HUGE_N) do
      local lo, hi = stats(p:sample{ n = n, count = 200, seed = n })
      assert.is_true(lo >= 32 and hi <= 33)
    end
  end)

  it("with equal jitter, a huge retry stays within [max/2, max]", function()
    local p = policy{ initial = 1, multiplier = 10, max = 32, jitter = "equal" }
    for _, n in ipairs(HUGE_N) do
      local lo, hi = stats(p:sample{ n = n, count = 200, seed = n })
      assert.is_true(lo >= 16 and hi <= 32)
    end
  end)

  it("linear: initial + step * n, capped and finite at huge n", function()
    local p = policy{ kind = "linear", initial = 1, step = 3, max = 60, jitter = "none" }
    assert.are.equal(1, one(p, 0))
    assert.are.equal(7, one(p, 2))
    assert.are.equal(58, one(p, 19))
    assert.are.equal(60, one(p, 20))
    for _, n in ipairs(HUGE_N) do assert.are.equal(60, one(p, n)) end
    assert.are.equal(60, one(p, math.maxinteger))
  end)

  it("constant: initial at every retry", function()
    local p = policy{ kind = "constant", initial = 5, max = 60, jitter = "none" }
    for _, n in ipairs{ 0, 1, 7, 31, 1024, 1000000, 2147483647, math.maxinteger } do
      assert.are.equal(5, one(p, n))
    end
  end)

  it("the schedule itself stays finite over many capped retries", function()
    local p = policy({ initial = 1, multiplier = 10, max = 32, jitter = "none" })
    local s = p:schedule{ seed = 1, attempts = 400 }
    assert.are.equal(400, #s)
    for i = 1, 399 do
      assert.are.equal(i <= 2 and 10 ^ (i - 1) or 32, s[i].wait)
    end
    assert.are.equal("exhausted", s[400].verdict)
  end)
end)
