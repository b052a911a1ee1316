-- Hot reload: a bad file keeps the old policy answering; a good one is for
-- the calls that begin after it, while calls in flight finish under the
-- policy they began with.
local lr = require "luaretry"

local V1 = "max_attempts = 5\nfunction is_transient(status) return status == 503 end\n"
local V2 = "max_attempts = 2\nfunction is_transient(status) return status == 502 end\n"

describe("reload", function ()
  it("with a syntax error keeps the old policy answering, and says why", function ()
    local p = assert(lr.load_string(V1, "=v1"))
    local ok, err = p:reload("max_attempts = = 3", "=broken")
    assert.is_nil(ok)
    assert.matches("broken:1:", err)
    assert.are.equal("retry", p:classify({ status = 503 }).verdict)
    assert.are.equal(5, p:tuning().max_attempts)
  end)

  it("takes effect for calls that begin after it; a call in flight keeps its own", function ()
    local p = assert(lr.load_string(V1, "=v1"))
    local before = p:begin { virtual = true }
    assert.is_true(before:report({ status = 503 }).retry)
    assert.is_true(p:reload(V2, "=v2"))
    -- the call begun before: V1's classifier and its 5 attempts
    assert.is_true(before:report({ status = 503 }).retry)
    assert.are.equal("final", before:report({ status = 502 }).verdict)
    -- a call begun after: V2
    local after = p:begin { virtual = true }
    assert.are.equal("final", after:report({ status = 503 }).verdict)
    after = p:begin { virtual = true }
    assert.is_true(after:report({ status = 502 }).retry)
    local d = after:report { status = 502 }
    assert.are.equal("exhausted", d.verdict)
    assert.are.equal(2, d.attempt)
  end)

  it("an option set on a loaded policy reaches every Lua state of it", function ()
    local p = assert(lr.load_string("max_attempts = 3\noptions = { code = 503 }\n" ..
      "function is_transient(status) return status == options.code end\n", "=opt"))
    local held = p:begin { virtual = true }   -- holds one state
    assert.is_true(p:set("options.code", "429"))
    local fresh = p:begin { virtual = true }
    assert.is_true(fresh:report({ status = 429 }).retry)
    assert.is_true(held:report({ status = 503 }).retry)  -- began before the change
  end)
end)

describe("reload_if_changed", function ()
  local proc = require "support.proc"

  it("looks at the file at most once a second and reloads it when it changed", function ()
    local dir = proc.tmpdir()
    local path = dir .. "/p.lua"
    proc.writefile(path, V1)
    local p = assert(lr.load(path))
    assert.is_false(p:reload_if_changed())          -- looked: unchanged
    proc.writefile(path, V2 .. "-- now answers 502\n")
    assert.is_false(p:reload_if_changed())          -- within the second: not looked
    assert.are.equal("retry", p:classify({ status = 503 }).verdict)
    proc.sleep(1.05)
    assert.is_true(p:reload_if_changed())
    assert.are.equal("final", p:classify({ status = 503 }).verdict)
    assert.are.equal("retry", p:classify({ status = 502 }).verdict)
    proc.sleep(1.05)
    proc.writefile(path, "max_attempts = = 1\n")    -- broken: the old one stays
    local ok, err = p:reload_if_changed()
    assert.is_nil(ok)
    assert.matches("p.lua:1:", err)
    assert.are.equal("retry", p:classify({ status = 502 }).verdict)
    proc.rmtree(dir)
  end)
end)

describe("on_breaker", function ()
  it("tells the script of each change of the breaker's state", function ()
    local lines = {}
    local p = assert(lr.load_string([[
max_attempts = 10
backoff = { initial = 0, jitter = "none" }
breaker = { failures = 2, open_seconds = 60 }
function on_breaker(state) print("breaker is " .. state) end
]], "=hooked", { log = function (line) lines[#lines + 1] = line end }))
    local c = p:begin { virtual = true }
    c:report { status = 503 }
    assert.are.equal("circuit_open", c:report({ status = 503 }).verdict)
    assert.are.same({ "breaker is open" }, lines)
  end)
end)

describe("policies and calls collected in any order", function ()
  it("a policy closed or collected before its calls lives until the last of them", function ()
    for i = 1, 200 do
      local p = assert(lr.load_string("max_attempts = 3", "=gc"))
      local c = p:begin { virtual = true }
      local c2 = p:begin { virtual = true }
      if i % 2 == 0 then p:close() end
      if i % 3 == 0 then c:close() end
      p, c, c2 = nil, nil, nil
      if i % 7 == 0 then collectgarbage() end
    end
    collectgarbage()
    local p = assert(lr.load_string("max_attempts = 3", "=gc"))
    local c = p:begin { virtual = true }
    p:close()
    local ok, err = pcall(c.report, c, { status = 503 })
    assert.is_false(ok)
    assert.matches("policy is closed", err)
  end)
end)
