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
