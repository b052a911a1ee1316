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
