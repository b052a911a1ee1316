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
