-- A policy that requires another (require "http") inherits its settings
-- and hooks as defaults: its own assignments win wherever they stand in the
-- file, an inherited hook stays reachable (require returns what the file
-- set), `name` is not inherited, rules name the real file and line, and
-- `check` shows which settings came from where.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
package.path = here .. "/?.lua;" .. package.path
local proc = require "support.proc"
local lr = require "luaretry"

describe("inheriting from a shipped policy", function()
  local dir
  before_each(function() dir = proc.tmpdir() end)
  after_each(function() proc.rmtree(dir) end)

  local function write(name, text)
    proc.writefile(dir .. "/" .. name, text)
    return dir .. "/" .. name
  end

  it("keeps the policy's own settings set before the require", function()
    local t = assert(lr.load(write("before.lua", 'max_attempts = 3\ndeadline = 10\nrequire "http"\n'))):tuning()
    assert.are.equal(3, t.max_attempts)
    assert.are.equal(10, t.deadline)
    assert.are.equal(30, t.connect_timeout)   -- not set here: http's
    assert.are.equal("before", t.name)         -- a name is never inherited
  end)

  it("keeps them when they stand after the require, too", function()
    local t = assert(lr.load(write("after.lua", 'require "http"\nmax_attempts = 3\ndeadline = 10\n'))):tuning()
    assert.are.same({ 3, 10 }, { t.max_attempts, t.deadline })
  end)

  it("and across two requires in a row", function()
    write("base2.lua", "max_attempts = 7\ndeadline = 70\nattempt_timeout = 7\n")
    local t = assert(lr.load(write("two.lua", 'require "http"\nmax_attempts = 3\nrequire "base2"\n'))):tuning()
    assert.are.equal(3, t.max_attempts)       -- ours, set between the two
    assert.are.equal(70, t.deadline)          -- base2's, the later require
  end)

  it("lets an inherited hook be wrapped, wherever the wrapper stands", function()
    local path = write("wrap.lua", [[
max_attempts = 3
function is_transient(status, body, info)
  if status == 418 then return false, "a teapot" end
  return http.is_transient(status, body, info)
end
http = require "http"
]])
    local p, err = lr.load(path)
    assert(p, err)
    local teapot = p:classify { status = 418 }
    assert.are.same({ "final", "a teapot" }, { teapot.verdict, teapot.message })
    local busy = p:classify { status = 503 }
    assert.are.equal("retry", busy.verdict)
    assert.are.equal(path .. ":2", busy.rule)  -- the wrapper decided
  end)

  it("names the inherited hook's own file and line as the rule", function()
    local p = assert(lr.load(write("plain.lua", 'max_attempts = 2\nrequire "http"\n')))
    assert.matches("policies/http%.lua:%d+$", p:classify { status = 503 }.rule)
    assert.are.equal("final", p:classify { status = 404 }.verdict)
  end)

  it("runs with its own limits against a real server", function()
    local srv = proc.server(proc.root .. "/policies/faults/always-503.lua")
    finally(function() srv:stop() end)
    local path = write("two_tries.lua", 'max_attempts = 2\ndeadline = 20\nrequire "http"\n')
    local r = proc.run({ "run", path, srv.base .. "/x", "--set", "backoff.initial=0.05",
                         "--set", "backoff.jitter_max=0.05", "-s" }, { timeout = 30 })
    assert.are.equal(4, r.code, r.stderr)
    assert.are.equal(2, #srv:requests_on("/x"))
  end)

  it("wraps require only while the file loads: at run time it is the sandbox's own", function()
    write("base3.lua", "deadline = 5\n")
    local p = assert(lr.load(write("late.lua", [[
max_attempts = 2
function is_transient(status, body, info)
  return false, type(require "base3")   -- a policy file returns nothing: true
end
]])))
    assert.are.equal("boolean", p:classify { status = 503 }.message)
    local q = assert(lr.load(write("early.lua", 'max_attempts = 2\nlocal b = require "base3"\n' ..
                                    'function is_transient() return false, type(b) end\n')))
    assert.are.equal("table", q:classify { status = 503 }.message)
  end)

  it("names a loop of requires; a failed require may be tried again; limits still stop it", function()
    local p, err = lr.load(write("self.lua", 'max_attempts = 2\nrequire "self"\n'))
    assert.is_nil(p)
    assert.matches("self%.lua:2: require: 'self' requires itself", err)
    assert(lr.load(write("again.lua", [[
max_attempts = 2
assert(not pcall(require, "nope"))
local ok, why = pcall(require, "nope")
assert(not ok and not why:find("loop"), why)
]])))
    write("spin.lua", "while true do end\n")
    local q, e = lr.load(write("spins.lua", 'max_attempts = 2\npcall(require, "spin")\n'))
    assert.is_nil(q)
    assert.matches("spin%.lua:1: time limit reached", e)
  end)

  it("says which required file set an unknown name", function()
    write("basefoo.lua", "deadline = 5\nfoo = 1\n")
    local p = assert(lr.load(write("childfoo.lua", 'max_attempts = 2\nrequire "basefoo"\nbar = 2\n')))
    local all = table.concat(p:warnings(), "\n")
    assert.matches("childfoo%.lua:3: bar: unknown name\n", all .. "\n")
    assert.matches("childfoo%.lua: foo: unknown name %(set by require \"basefoo\"%)\n", all .. "\n")
  end)

  it("check shows which settings came from where", function()
    write("mid.lua", 'max_attempts = 3\ndeadline = 10\nrequire "http"\n')
    local path = write("top.lua", 'require "mid"\nattempt_timeout = 7\n')
    local r = proc.run({ "check", path }, { timeout = 30 })
    assert.are.equal(0, r.code, r.stdout)
    local from_mid = r.stdout:match("\n  inherited from mid:([^\n]*)")
    local from_http = r.stdout:match("\n  inherited from http:([^\n]*)")
    assert.are.equal(" max_attempts deadline", from_mid, r.stdout)
    assert.truthy(from_http and from_http:find(" is_transient", 1, true), r.stdout)
    assert.is_nil(from_http:find("attempt_timeout", 1, true))   -- top's own
    assert.is_nil(proc.run({ "check", proc.root .. "/policies/http.lua" }).stdout:find("inherited"))
  end)
end)
