-- A classifier that declares fewer than 2 parameters (is_transient(status),
-- is_success(status)) never sees the body, so none is made for it; one
-- whose second parameter is named `_` gets ""; one with a body parameter,
-- or `...`, gets it as ever.
local lr = require "luaretry"

local function decide(src, outcome)
  local p = assert(lr.load_string("max_attempts = 3\n" .. src, "=body"))
  local c = assert(p:begin { virtual = true, seed = 1 })
  return c:report(outcome)
end

describe("the body handed to a classifier", function ()
  it("is not needed by is_transient(status): its verdict is the same", function ()
    local src = "function is_transient(status) return status == 503 end\n"
    assert.is_true(decide(src, { status = 503, body = "busy" }).retry)
    assert.are.equal("final", decide(src, { status = 404, body = "gone" }).verdict)
    assert.is_true(decide(src, { status = 503 }).retry)
  end)

  it("reaches is_transient(status, ...) and is_transient(status, body)", function ()
    local vararg = "function is_transient(status, ...) return select('#', ...) >= 1 and (...) == 'busy' end\n"
    assert.is_true(decide(vararg, { status = 503, body = "busy" }).retry)
    assert.are.equal("final", decide(vararg, { status = 503, body = "other" }).verdict)
    local named = "function is_transient(status, body) return body == 'busy' end\n"
    assert.is_true(decide(named, { status = 503, body = "busy" }).retry)
    assert.are.equal("final", decide(named, { status = 503, body = "other" }).verdict)
  end)

  it("is \"\" for a classifier whose second parameter is named _, and info still comes", function ()
    local src = "function is_transient(status, _, info) return _ == '' and info.attempt == 1 end\n"
    assert.is_true(decide(src, { status = 503, body = "busy" }).retry)
    local wrapped = "local inner = function (status, body) return body == 'busy' end\n" ..
                    "function is_transient(status, _, info) return inner(status, _) end\n"
    assert.are.equal("final", decide(wrapped, { status = 503, body = "busy" }).verdict)
    -- the shipped http.lua reads no body: it names it _
    local p = assert(lr.load("http"))
    local c = assert(p:begin { virtual = true, seed = 1 })
    assert.is_true(c:report { status = 503, body = string.rep("x", 100) }.retry)
  end)

  it("is not needed by is_success(status) either", function ()
    local src = "function is_success(status) return status == 299 end\n" ..
                "function is_transient(status, body) return body == 'again' end\n"
    assert.are.equal("success", decide(src, { status = 299, body = "x" }).verdict)
    assert.is_true(decide(src, { status = 200, body = "again" }).retry)
  end)

  it("still reports a classifier's error with file and line", function ()
    local d = decide("function is_transient(status)\n  error('boom')\nend\n", { status = 503 })
    assert.are.equal("policy_error", d.verdict)
    assert.matches("body:3: boom", d.message)
  end)

  it("is each decision's own: a new body every time, short or long, never the one before", function ()
    local p = assert(lr.load_string("max_attempts = 100\n" ..
      "function is_transient(status, body) return body:sub(-2) ~= 'ok' end\n", "=body"))
    local c = assert(p:begin { virtual = true, seed = 1 })
    local long = string.rep("x", 100)
    local bodies = { "busy", "busy", "ok", long, long .. "ok", long, "", "busy!ok", "busy" }
    for i, body in ipairs(bodies) do
      local d = c:report { status = 503, body = body }
      local want = body:sub(-2) ~= "ok"
      assert.are.equal(want, d.retry, "decision " .. i .. " on " .. #body .. " bytes")
      if not d.retry then c = assert(p:begin { virtual = true, seed = 1 }) end
    end
  end)

  it("that does not fit under memory_limit is a policy error naming the limit; the next fits", function ()
    local p = assert(lr.load_string("max_attempts = 100\nbody_limit = 1048576\n" ..
      "function is_transient(status, body) return #body > 0 end\n", "=body",
      { memory_limit = 65536 }))
    local c = assert(p:begin { virtual = true, seed = 1 })
    local d = c:report { status = 503, body = string.rep("x", 200000) }
    assert.are.equal("policy_error", d.verdict)
    assert.matches("memory limit reached", d.message)
    c = assert(p:begin { virtual = true, seed = 1 })
    assert.is_true(c:report({ status = 503, body = string.rep("y", 1000) }).retry)
  end)

  it("near memory_limit, many short bodies kept by the script: each decision a verdict or the limit", function ()
    -- short strings are interned: their table grows as the script keeps
    -- them, and near the limit a body is pushed with no room to grow it
    -- (with this limit, about 150 of these pushes: Lua keeps the table)
    local p = assert(lr.load_string("max_attempts = 1000000\n" ..
      "local kept = {}\n" ..
      "function is_transient(status, body) kept[#kept + 1] = body; return true end\n", "=body",
      { memory_limit = 262144 }))
    local c = assert(p:begin { virtual = true, seed = 1 })
    local limited, retried = 0, 0
    for i = 1, 6000 do
      local d = c:report { status = 503, body = string.format("busy %06d", i) }
      if d.retry then
        retried = retried + 1
      else
        assert.are.equal("policy_error", d.verdict)
        assert.matches("memory limit reached", d.message)
        limited = limited + 1
        c = assert(p:begin { virtual = true, seed = 1 })
      end
    end
    assert.is_true(retried > 100)
    assert.is_true(limited > 0)
  end)
end)
