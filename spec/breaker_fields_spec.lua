-- `luaretry check` on a breaker whose window is refused (above its range):
-- the window's own error, and no min_calls error that quotes the default
-- window (100) as if the policy had written it.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
package.path = here .. "/?.lua;" .. package.path
local proc = require "support.proc"

describe("breaker.min_calls beside a refused breaker.window", function()
  local dir
  setup(function() dir = proc.tmpdir() end)
  teardown(function() proc.rmtree(dir) end)

  local function check(breaker)
    local file = dir .. "/br.lua"
    proc.writefile(file, "name = 'br'\nmax_attempts = 3\ndeadline = 10\nbreaker = " .. breaker .. "\n")
    return proc.run({ "check", file }, { timeout = 30 })
  end

  it("says only the window's error, never the default window", function()
    local r = check("{ window = 2000, min_calls = 1000, failure_rate = 0.5 }")
    assert.are_not.equal(0, r.code)
    local out = r.stdout .. r.stderr
    assert.matches("breaker.window: expected a whole number from 1 to 1000, got 2000", out, 1, true)
    assert.is_nil(out:find("(100)", 1, true), out)
    assert.is_nil(out:find("min_calls: 1000 is above", 1, true), out)
  end)

  it("still compares min_calls with a window that is valid", function()
    local r = check("{ window = 50, min_calls = 80, failure_rate = 0.5 }")
    assert.are_not.equal(0, r.code)
    assert.matches("breaker.min_calls: 80 is above breaker.window (50)", r.stdout .. r.stderr, 1, true)
  end)
end)
