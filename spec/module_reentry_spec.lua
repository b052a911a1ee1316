-- The Lua module against its own callbacks: opts.log runs host code in the
-- middle of a library call (a script's print() during a decision), and that
-- code may reload, close or reuse what is in progress.  Each case is an
-- error or waits for the call to be over, never a crash: `make test` also
-- runs this file under valgrind, where an invalid read or a use after free
-- fails it.
local lr = require "luaretry"

local PRINTS = [[
max_attempts = 3
function is_transient(status)
  print("judging " .. status)
  return status == 503
end
]]

local function has(haystack, needle)
  assert.is_truthy(tostring(haystack):find(needle, 1, true),
    ("expected to find %q in:\n%s"):format(needle, tostring(haystack)))
end

describe("opts.log calling back into the module", function()
  it("may reload the policy in the middle of a decision", function()
    local p
    local reloaded = 0
    p = assert(lr.load_string(PRINTS, "=prints", { log = function(line)
      if line:find("judging", 1, true) and reloaded < 3 then
        reloaded = reloaded + 1
        assert(p:reload("max_attempts = 7\nfunction is_transient(s) print('v2 ' .. s) return true end",
                        "=v2"))
      end
    end }))
    local d = p:classify{ status = 503 }
    assert.are.equal("retry", d.verdict)       -- decided under the load it began with
    assert.are.equal(1, reloaded)
    assert.are.equal(7, p:tuning().max_attempts)
    assert.are.equal("retry", p:classify{ status = 404 }.verdict)  -- the new load says true
  end)

  it("may close the policy in the middle of a decision: the close waits for it", function()
    local p
    p = assert(lr.load_string(PRINTS, "=prints", { log = function() p:close() end }))
    local d = p:classify{ status = 503 }
    assert.are.equal("retry", d.verdict)
    assert.has_error(function() p:classify{ status = 503 } end, "policy is closed")
    -- a call begun before the close lives on, and its own log closes nothing twice
    local q
    q = assert(lr.load_string(PRINTS, "=prints", { log = function() q:close() end }))
    local c = q:begin{ virtual = true, seed = 1 }
    local first = c:report{ status = 503 }
    assert.are.equal("retry", first.verdict)
    assert.has_error(function() c:report{ status = 503 } end, "the call's policy is closed")
    c:close()
  end)

  it("may close the policy from a line p:begin tells: the close waits for the call", function()
    -- The fleet's "connection lost" line is told by a begin (its breaker's
    -- permit) once a call started the fleet's thread and it failed.
    -- Before the begin kept the policy busy, the close freed it under
    -- the begin (a use after free, valgrind's and ASan's runs).
    local system, socket = require "system", require "socket"
    local s = assert(socket.bind("127.0.0.1", 0))
    local _, port = s:getsockname()
    s:close() -- nothing listens there
    local told_in_begin
    for _ = 1, 10 do -- a line told outside a begin is told once: a new policy
      local p, in_begin, told
      p = assert(lr.load_string("max_attempts = 3\nbreaker = { failures = 5, open_seconds = 1 }\n",
        "=fleet", {
        set = { ["fleet.redis"] = "redis://127.0.0.1:" .. port },
        log = function()
          told = true
          if in_begin then told_in_begin = true; p:close() end
        end }))
      local c = p:begin{ seed = 1 }
      c:next()
      c:report{ status = 503 } -- the fleet's thread starts, and fails to connect
      c:close()
      local deadline = system.monotime() + 3
      while not told and system.monotime() < deadline do
        in_begin = true
        c = p:begin{ seed = 1 }
        in_begin = false
        if told_in_begin then break end
        c:close()
        system.sleep(0.01)
      end
      if told_in_begin then
        assert.has_error(function() c:report{ status = 503 } end, "the call's policy is closed")
        assert.has_error(function() p:begin() end, "policy is closed")
        c:close()
        break
      end
      p:close()
    end
    assert.is_true(told_in_begin)
  end)

  it("may not reenter the call it is called from", function()
    local c
    local p = assert(lr.load_string(PRINTS, "=prints", { log = function()
      local ok, err = pcall(c.report, c, { status = 200 })
      assert(not ok and err:find("the call is in use", 1, true), tostring(err))
      ok, err = pcall(c.close, c)
      assert(not ok and err:find("the call is in use", 1, true), tostring(err))
    end }))
    c = p:begin{ virtual = true, seed = 1 }
    assert.are.equal("retry", c:report{ status = 503 }.verdict)
    assert.are.equal("success", c:report{ status = 200 }.verdict)
  end)

  it("logs on the thread that calls now, not the one that loaded the policy", function()
    local lines = {}
    local co = coroutine.create(function()
      return assert(lr.load_string(PRINTS, "=prints", { log = function(line)
        lines[#lines + 1] = line
      end }))
    end)
    local _, p = coroutine.resume(co)
    co = nil
    collectgarbage()
    collectgarbage()  -- the loading coroutine is gone
    assert.are.equal("retry", p:classify{ status = 503 }.verdict)
    assert.are.same({ "judging 503" }, lines)
  end)
end)

describe("p:run", function()
  local p = assert(lr.load_string("max_attempts = 3\nbackoff = { initial = 0, jitter = 'none' }",
                                  "=run"))

  for label, fn in pairs{
    ["true"] = function() return true end,
    ["a string"] = function() return "200" end,
    ["nothing"] = function() end,
    ["2^32+200"] = function() return 2^32 + 200 end,
    ["-1"] = function() return -1 end,
    ["a fraction"] = function() return 200.5 end,
    ["a status and a table"] = function() return 200, {} end,
  } do
    it("refuses a function that returns " .. label .. ", never a guess", function()
      local ok, err = pcall(p.run, p, fn, { virtual = true, seed = 1 })
      assert.is_false(ok)
      has(err, "p:run: the function returned")
    end)
  end

  it("takes an outcome table, or a status and a body", function()
    local n = 0
    local d = p:run(function()
      n = n + 1
      if n == 1 then return { status = 503 } end
      return 200, "ok"
    end, { virtual = true, seed = 1 })
    assert.are.equal("success", d.verdict)
    assert.are.equal(2, d.attempt)
  end)
end)
