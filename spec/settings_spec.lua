-- One value, one meaning: what `luaretry check` prints of a setting is what
-- the engine uses, whether a script or --set (luaretry_policy_set) gave it;
-- every value the engine changes is said.  Runs the real build/luaretry
-- (LUARETRY_BIN if set).
local proc = require "support.proc"

local BASE = [[
-- base
max_attempts = 4
deadline = 10
attempt_timeout = 2
backoff = { initial = 0.05, max = 0.2, jitter = "none" }
]]

local dir
before_each(function () dir = proc.tmpdir() end)
after_each(function () proc.rmtree(dir) end)

-- Writes text as dir/NAME, returns its path.
local function policy(name, text)
  local path = dir .. "/" .. name
  proc.writefile(path, text)
  return path
end

local function check(args)
  return proc.run(proc.concat({ "check" }, args), { timeout = 60 })
end

-- settings[NAME] = VALUE from check's "settings:" line.
local function settings(out)
  local line = assert(out:match("\n  settings: ([^\n]*)"), out)
  local t = {}
  for name, value in line:gmatch("(%S+)=(%S*)") do t[name] = value end
  return t
end

describe("a long name", function ()
  it("set by --set is abbreviated as the script's: its head, '~' and a hash of the whole", function ()
    local long = ("a"):rep(70)
    local script = check({ policy("longname.lua", ("-- n\nname = %q\nmax_attempts = 2\ndeadline = 5\n"):format(long)) })
    assert.are.equal(0, script.code, script.stdout .. script.stderr)
    local want = ("a"):rep(46) .. "~" .. proc.fnv1a(long)
    assert.are.equal(want, settings(script.stdout).name)
    local set = check({ policy("base.lua", BASE), "--set", "name=" .. long })
    assert.are.equal(0, set.code, set.stdout .. set.stderr)
    local s = settings(set.stdout)
    assert.are.equal(want, s.name)
    assert.are.equal(want, s["fleet.key"]) -- the fleet's key is the name's
    -- two names that differ past the cut stay two
    local other = check({ policy("base.lua", BASE), "--set", "name=" .. ("a"):rep(69) .. "b" })
    assert.are_not.equal(want, settings(other.stdout).name)
  end)
end)

-- The rule for a number a host sets (luaretry_policy_set, --set,
-- options.NAME): decimal, as a policy file writes it.  strtod's own
-- leniency let " 3", "+3" and "0x3" pass while "3 " was refused.
describe("a number set by the host", function ()
  local lr = require "luaretry"
  local function policy_of(src)
    return assert(lr.load_string(src, "=settings_spec"))
  end
  local SRC = "max_attempts = 2\ndeadline = 10\noptions = { n = 1 }\n"

  it("is a decimal number as a policy file writes it, the same for every number setting", function ()
    local p = policy_of(SRC)
    for _, v in ipairs { " 3", "\t3", "+3", "0x3", "3 ", "3\n", "inf", "nan", "3e", "." } do
      local ok, err = p:set("max_attempts", v)
      assert.is_falsy(ok, "max_attempts=" .. v .. " was taken")
      assert.matches("^max_attempts: expected a whole number", err)
      assert.are.equal(2, p:tuning().max_attempts, v)
    end
    for _, v in ipairs { "0x10", " 1.5", "1.5 ", "+1.5", "infinity" } do
      local ok, err = p:set("deadline", v)
      assert.is_falsy(ok, "deadline=" .. v .. " was taken")
      -- the rule is said when strtod would have read it
      assert.matches("(a decimal number as a policy file writes it: no spaces, '+', hex, inf or nan)",
                     err, 1, true)
      assert.are.equal(10, p:tuning().deadline, v)
    end
    -- what a file writes is taken: a fraction, a bare point, an exponent
    for v, want in pairs { ["3"] = 3, ["3e0"] = 3, ["3.0"] = 3, ["30E-1"] = 3 } do
      assert(p:set("max_attempts", v))
      assert.are.equal(want, p:tuning().max_attempts, v)
    end
    for v, want in pairs { [".5"] = 0.5, ["5."] = 5, ["1e+1"] = 10, ["2.5"] = 2.5 } do
      assert(p:set("deadline", v))
      assert.are.equal(want, p:tuning().deadline, v)
    end
    assert(p:set("deadline", 0.25)) -- a Lua number, as the module spells it
    assert.are.equal(0.25, p:tuning().deadline)
    -- an underflow is named as typed, not as the 0 it became
    local ok, err = p:set("deadline", "1e-400")
    assert.is_falsy(ok)
    assert.matches("got 1e-400", err, 1, true)
  end)

  it("holds for the host's limits and the script's options too", function ()
    local p = policy_of(SRC)
    for _, v in ipairs { " 1", "0x1", "+1" } do
      local ok, err = p:set("time_limit", v)
      assert.is_falsy(ok, "time_limit=" .. v .. " was taken")
      assert.matches("^time_limit: expected", err)
      ok, err = p:set("memory_limit", v == " 1" and " 1048576" or v == "+1" and "+1048576" or "0x100000")
      assert.is_falsy(ok, "memory_limit=" .. v .. " was taken")
      ok, err = p:set("options.n", v)
      assert.is_falsy(ok, "options.n=" .. v .. " was taken")
      assert.matches("options.n: expected a number", err, 1, true)
    end
    assert(p:set("time_limit", "0.5"))
    assert(p:set("memory_limit", "1048576"))
    assert(p:set("options.n", "-2.5"))
  end)

  it("is refused by --set as by the library, naming the rule", function ()
    local r = check({ policy("base.lua", BASE), "--set", "max_attempts=+3" })
    assert.are.equal(3, r.code, r.stdout .. r.stderr)
    assert.matches("--set max_attempts: expected a whole number from 1 to 1000000000, got \"+3\" " ..
                   "(a decimal number as a policy file writes it: no spaces, '+', hex, inf or nan)",
                   r.stdout, 1, true)
  end)
end)

-- `check` reports every value the engine clamps, and prints what it uses.
describe("luaretry check of a value the engine changes", function ()
  it("warns of a hedge's ceiling and floor clamped below attempt_timeout, with the value used", function ()
    local path = policy("hc.lua", "-- h\nmax_attempts = 3\ndeadline = 10\nattempt_timeout = 2\n" ..
                        "hedge = { delay = 'p95', floor = 1.5, ceiling = 5 }\n")
    local r = check({ path })
    assert.are.equal(3, r.code, r.stdout .. r.stderr) -- a warning is a problem
    assert.matches("warning: " .. path .. ":5: hedge.ceiling: 5 s is not below attempt_timeout (2 s): " ..
                   "clamped to 1 s, half of it\n", r.stdout, 1, true)
    assert.matches("warning: " .. path .. ":5: hedge.floor: 1.5 s is above hedge.ceiling " ..
                   "(1 s, half of attempt_timeout): clamped to 1 s\n", r.stdout, 1, true)
    local s = settings(r.stdout)
    assert.are.equal("1", s["hedge.ceiling"])
    assert.are.equal("1", s["hedge.floor"])
    -- a --set that makes it so is named
    path = policy("hc2.lua", "-- h\nmax_attempts = 3\ndeadline = 10\nhedge = { delay = 'p95', ceiling = 1.5 }\n")
    r = check({ path, "--set", "attempt_timeout=1" })
    assert.matches(path .. ":4: hedge.ceiling: 1.5 s is not below attempt_timeout (1 s): clamped to 0.5 s, " ..
                   "half of it (attempt_timeout from --set)", r.stdout, 1, true)
    -- a floor above the ceiling, both given: the error alone, no clamp said
    path = policy("hf.lua", "-- h\nmax_attempts = 5\nattempt_timeout = 5\n" ..
                            "hedge = { delay = 'p95', max = 1, ceiling = 0.5, floor = 0.8 }\n")
    r = check({ path })
    assert.are.equal(3, r.code, r.stdout .. r.stderr)
    assert.matches(path .. ": does not load (1 problem)\n", r.stdout, 1, true)
    assert.matches(path .. ":4: hedge.ceiling: 0.5 is below hedge.floor (0.8)\n", r.stdout, 1, true)
    assert.is_nil(r.stdout:find("clamped", 1, true))
    -- the defaults clamped say nothing: the policy did not set them
    path = policy("hd.lua", "-- h\nmax_attempts = 3\ndeadline = 10\nattempt_timeout = 0.5\nhedge = { delay = 'p95' }\n")
    r = check({ path })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.are.equal("0.25", settings(r.stdout)["hedge.ceiling"])
  end)

  it("refuses --set rate.burst alone, as rate = { burst = 3 } in a script is refused", function ()
    local base = policy("base.lua", BASE)
    local r = check({ base, "--set", "rate.burst=3" })
    assert.are.equal(3, r.code, r.stdout .. r.stderr)
    assert.matches("does not load", r.stdout, 1, true)
    assert.matches("--set rate.burst: the policy has no rate limiter to set; one needs rate.limit " ..
                   "(attempts per second), rate.adaptive=true or rate.headers=true", r.stdout, 1, true)
    local script = check({ policy("rb.lua", BASE .. "rate = { burst = 3 }\n") })
    assert.are.equal(3, script.code, script.stdout)
    assert.matches("rb.lua:6: rate: needs limit", script.stdout, 1, true)
    -- a --set that leaves a script's rate with nothing to pace by is named
    r = check({ policy("ra.lua", BASE .. "rate = { adaptive = true }\n"), "--set", "rate.adaptive=false" })
    assert.are.equal(3, r.code, r.stdout)
    assert.matches("ra.lua:6: rate: needs limit (attempts per second), adaptive = true or headers = true " ..
                   "(rate.adaptive from --set)", r.stdout, 1, true)
    -- with a limit, burst is taken; rate=none still turns it off
    r = check({ base, "--set", "rate.burst=3", "--set", "rate.limit=5" })
    assert.are.equal(0, r.code, r.stdout)
    assert.are.equal("3", settings(r.stdout)["rate.burst"])
    r = check({ base, "--set", "rate=none", "--set", "rate.burst=3" })
    assert.are.equal(0, r.code, r.stdout)
    assert.are.equal("none", settings(r.stdout)["rate.burst"])
  end)

  it("prints throttle_backoff.max as the engine uses it: initial when larger than the default 20", function ()
    local base = policy("base.lua", BASE)
    local r = check({ base, "--set", "throttle_backoff.initial=30" })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.are.equal("30", settings(r.stdout)["throttle_backoff.max"])
    -- the engine waits 30 s after a 429: the cap it used is the one shown
    r = proc.run({ "simulate", base, "--set", "throttle_backoff.initial=30", "--set", "throttle_backoff.jitter=none",
                   "--set", "deadline=1000", "--probe", "429" }, { timeout = 60 })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.matches("attempt 1: retry in 30.000 s (throttle)", r.stdout, 1, true)
    r = check({ policy("tb.lua", BASE .. "throttle_backoff = { initial = 25 }\n") })
    assert.are.equal("25", settings(r.stdout)["throttle_backoff.max"])
    r = check({ base })
    assert.are.equal("20", settings(r.stdout)["throttle_backoff.max"])
  end)
end)

-- retry_all_errors was http's and command's option before it was every
-- policy's field; luaretry-policy(5): the old name "is read until 1.0".
describe("options.retry_all_errors in a script", function ()
  it("is read as retry_all_errors, with the warning --set gives it", function ()
    local path = policy("rae2.lua", 'require "http"\nname = "rae2"\noptions.retry_all_errors = true\n')
    local r = check({ path })
    assert.are.equal(3, r.code, r.stdout .. r.stderr) -- the warning
    assert.matches("warning: " .. path .. ": options.retry_all_errors: renamed retry_all_errors " ..
                   "(the old name is read until 1.0)\n", r.stdout, 1, true)
    assert.are.equal("true", settings(r.stdout).retry_all_errors)
    assert.matches("\n  404%s+retry%s+backoff%s+retry_all_errors\n", r.stdout)
    -- the engine retries it: simulate's 404 is no longer final
    r = proc.run({ "simulate", path, "--probe", "404", "--set", "max_attempts=2" }, { timeout = 60 })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.matches("attempt 1: retry in", r.stdout, 1, true)
    -- a script's own options table, false too, and a returned table
    r = check({ policy("own.lua", BASE .. "options = { retry_all_errors = false }\n") })
    assert.matches("options.retry_all_errors: renamed retry_all_errors", r.stdout, 1, true)
    assert.are.equal("false", settings(r.stdout).retry_all_errors)
    r = check({ policy("ret.lua", "return { max_attempts = 2, deadline = 5, options = { retry_all_errors = true } }\n") })
    assert.are.equal("true", settings(r.stdout).retry_all_errors)
  end)

  it("gives way to retry_all_errors and to --set, saying so", function ()
    local path = policy("both.lua", BASE .. "retry_all_errors = false\noptions = { retry_all_errors = true }\n")
    local r = check({ path })
    assert.matches("retry_all_errors is set too: options.retry_all_errors is ignored", r.stdout, 1, true)
    assert.are.equal("false", settings(r.stdout).retry_all_errors)
    path = policy("set.lua", BASE .. "options = { retry_all_errors = true }\n")
    r = check({ path, "--set", "retry_all_errors=false" })
    assert.are.equal("false", settings(r.stdout).retry_all_errors)
  end)
end)
