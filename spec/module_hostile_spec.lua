-- The Lua module against a hostile host: coroutines that come and go
-- around opts.log, tables whose fields come from __index (fresh strings
-- nothing else holds, collected by a log that runs the GC), bad arguments
-- in the middle of a call, failed loads by the thousand and sources with a
-- NUL byte.  Each case is a clean answer or error, never a read of freed
-- memory: run it under the ASan build (or valgrind) to see one.
local lr = require "luaretry"

local function has(haystack, needle)
  assert.is_truthy(tostring(haystack):find(needle, 1, true),
    ("expected to find %q in:\n%s"):format(needle, tostring(haystack)))
end

-- A log that collects everything unreferenced and fills the freed memory
-- with other strings, so a read of a freed one reads garbage.
local junk = {}
local function collecting_log()
  collectgarbage()
  collectgarbage()
  for i = 1, 200 do junk[#junk + 1] = ("!"):rep(100 + i % 50) .. i end
end

describe("opts.log and threads", function()
  it("runs on the thread of the call in progress, never one that has ended", function()
    local p
    local lines = {}
    local function log(line)
      lines[#lines + 1] = line
      -- other threads use the policy, and are collected, mid-decision
      coroutine.wrap(function() p:warnings() end)()
      coroutine.wrap(function() assert.is_true(p:is_idempotent{ method = "GET" }) end)()
      collectgarbage()
      collectgarbage()
      for i = 1, 5000 do junk[#junk + 1] = ("\255"):rep(150 + i % 80) .. i end
    end
    p = assert(lr.load_string(
      'max_attempts=3 function is_transient() print"one" print"two" return true end', "=p",
      { log = log }))
    assert.are.equal("retry", p:classify{ status = 503 }.verdict)
    assert.are.same({ "one", "two" }, lines)
    junk = {}
  end)
end)

describe("c:is_idempotent", function()
  it("is in use while the script decides: its log cannot close the call", function()
    local c
    local closed
    local p = assert(lr.load_string([[
max_attempts = 3
attempt_timeout = 5
function is_idempotent(r) print("deciding") error("boom") end]], "=p", { log = function()
      closed = { pcall(c.close, c) }
    end }))
    c = p:begin{ virtual = true, seed = 1 }
    local yes, err = c:is_idempotent{ method = "POST", url = "http://x/" }
    assert.is_nil(yes)
    has(err, "boom")
    assert.is_false(closed[1])
    has(closed[2], "the call is in use")
    c:close()
  end)
end)

describe("tables whose strings nothing else holds", function()
  local URL = "https://example.test/" .. ("u"):rep(60)
  local function fresh(t, fields)
    return setmetatable(t, { __index = function(_, k)
      return fields[k] and fields[k]() or nil
    end })
  end

  it("an outcome's fields from __index live through the decision", function()
    local p = assert(lr.load_string([[
max_attempts = 3
attempt_timeout = 5
function is_transient(s, body, info)
  print("collect")
  return false, info.url .. " " .. #body
end]], "=p", { log = collecting_log }))
    local outcome = fresh({ status = 500 }, {
      url = function() return "https://example.test/" .. ("u"):rep(60) end,
      body = function() return ("b"):rep(70) .. "!" end,
    })
    local d = p:classify(outcome)
    assert.are.equal(URL .. " 71", d.message)
    local c = p:begin{ virtual = true, seed = 1 }
    assert.are.equal(URL .. " 71", c:report(outcome).message)
    c:close()
    d = p:run(function() return outcome end, { virtual = true, seed = 1 })
    assert.are.equal(URL .. " 71", d.message)
    junk = {}
  end)

  it("a request's fields from __index, or a number read as a string, live through prepare",
     function()
    local p = assert(lr.load_string([[
max_attempts = 3
attempt_timeout = 5
function prepare(r) print("collect") end]], "=p", { log = collecting_log }))
    local c = p:begin{ virtual = true, seed = 1 }
    local r = c:prepare(fresh({ url = "http://x/" }, {
      method = function() return ("P"):rep(50) .. "OST" end,
      body = function() return ("b"):rep(100) .. "!" end,
    }))
    assert.are.equal(("P"):rep(50) .. "OST", r.method)
    assert.are.equal(("b"):rep(100) .. "!", r.body)
    r = c:prepare{ url = "http://x/", body = 12345678901234567 }
    assert.are.equal("12345678901234567", r.body)
    c:close()
    junk = {}
  end)
end)

describe("a prepare that replaces request.headers", function()
  -- by something not a table: it sent no header at all, without a word
  it("with no table is a policy error naming it; nil still means none", function()
    local p = assert(lr.load_string("max_attempts = 3\nattempt_timeout = 5\n" ..
                                    "function prepare(r) if r.url:find('nil') then r.headers = nil else r.headers = 'x' end end",
                                    "=ph"))
    local c = p:begin{ virtual = true, seed = 1 }
    local r, err = c:prepare{ url = "http://x/", headers = { A = "1" } }
    assert.is_nil(r)
    assert.matches("prepare: request.headers must be a table (names to strings), not a string", err, 1, true)
    r = assert(c:prepare{ url = "http://x/nil", headers = { A = "1" } })
    assert.is_nil(next(r.headers or {}))
    c:close()
  end)
end)

describe("a prepare whose request answers each read differently", function()
  -- its headers were sized from one read of __index and copied from the
  -- next: 200 long headers written into the room of one short one
  it("is read once: the first answer is sent, nothing written past the copy", function()
    local p = assert(lr.load_string([[
max_attempts = 1
attempt_timeout = 5
function prepare(request)
  local n, big = 0, {}
  for i = 1, 200 do big["X-H" .. i] = string.rep("A", 4000) end
  return setmetatable({ url = request.url }, { __index = function(_, k)
    if k == "url" then return request.url end
    if k ~= "headers" then return nil end
    n = n + 1
    if n == 1 then return { ["X-A"] = "1" } end
    return big
  end })
end]], "=twice"))
    for _ = 1, 3 do
      local c = p:begin{ virtual = true, seed = 1 }
      local r = assert(c:prepare({ method = "GET", url = "http://x/" }, 1))
      assert.are.same({ ["X-A"] = "1" }, r.headers)
      c:close()
    end
  end)
end)

describe("a prepare that names a header", function()
  -- "X Bad" was sent (the server answered 400) while "Evil: x" was refused
  it("is held to RFC 9110's token, the rule attempt_header's name follows", function()
    local p = assert(lr.load_string("max_attempts = 3\nattempt_timeout = 5\n" ..
                                    "function prepare(r) r.headers[r.url:match('#(.*)$')] = '1' end", "=pn"))
    local c = p:begin{ virtual = true, seed = 1 }
    for _, name in ipairs{ "X Bad", "Evil: x", "X\tTab", "caf\195\169", "(x)", "a/b", "" } do
      local r, err = c:prepare{ url = "http://x/#" .. name }
      assert.is_nil(r, name)
      assert.matches(('prepare: header name "%s" is not a name (letters, digits and '):format(name), err, 1, true)
    end
    local r = assert(c:prepare{ url = "http://x/#X-Ok_1.2~!#$%&'*+^`|" })
    assert.are.equal("1", r.headers["X-Ok_1.2~!#$%&'*+^`|"])
    c:close()
  end)
end)

describe("c:prepare with a bad attempt", function()
  it("is an error that leaves the call usable and closable", function()
    local p = assert(lr.load_string("max_attempts = 3\nattempt_timeout = 5", "=p"))
    local c = p:begin{ virtual = true, seed = 1 }
    assert.has_error(function() c:prepare({ url = "http://x/" }, 2.5) end)
    assert.has_error(function() c:prepare({ url = "http://x/" }, "two") end)
    assert.are.equal("http://x/", c:prepare({ url = "http://x/" }, 2).url)
    c:close()
    assert.has_error(function() c:next() end, "call is closed")
  end)
end)

describe("a failed load", function()
  local function registry_size()
    local n = 0
    for _ in pairs(debug.getregistry()) do n = n + 1 end
    return n
  end

  it("with opts.log keeps nothing of it", function()
    local logs = setmetatable({}, { __mode = "k" })
    -- one first: a freed reference stays in the registry as a link of its free list
    assert.is_nil(lr.load_string("this is no policy", "=bad", { log = function() end }))
    collectgarbage()
    local before = registry_size()
    for _ = 1, 500 do
      local log = function() end
      logs[log] = true
      assert.is_nil(lr.load_string("this is no policy", "=bad", { log = log }))
    end
    assert.is_nil(lr.load_string("x", "=bad", { log = function() end, set = { nope = 1 } }))
    collectgarbage()
    collectgarbage()
    assert.are.equal(before, registry_size())
    assert.is_nil(next(logs))
  end)
end)

describe("a source with a NUL byte", function()
  it("is refused, never read up to the NUL", function()
    local p, err = lr.load_string("max_attempts = 3\0 this is not Lua", "=nul")
    assert.is_nil(p)
    has(err, "NUL byte")
    p = assert(lr.load_string("max_attempts = 3\nattempt_timeout = 5", "=p"))
    local ok
    ok, err = p:reload("max_attempts = 4\0 junk", "=nul")
    assert.is_nil(ok)
    has(err, "NUL byte")
    assert.are.equal(3, p:tuning().max_attempts)
  end)
end)

describe("a NUL byte in what the library takes as a C string", function()
  it("is refused in a path and in a setting, never read up to the NUL", function()
    local dir = os.tmpname()
    os.remove(dir)
    local f = assert(io.open(dir, "w"))
    f:write("max_attempts = 2\n")
    f:close()
    local p, err = lr.load(dir .. "\0.ignored")
    os.remove(dir)
    assert.is_nil(p)
    has(err, "NUL byte")
    p = assert(lr.load_string("max_attempts = 3", "=p"))
    local ok
    ok, err = p:set("max_attempts\0junk", "5")
    assert.is_nil(ok)
    has(err, "NUL byte")
    ok, err = p:set("attempt_timeout", "5\0junk")
    assert.is_nil(ok)
    has(err, "NUL byte")
    assert.are.equal(3, p:tuning().max_attempts)
  end)

  it("is refused in a header's name or value (inbound, an outcome, rate_limit), never read up to the NUL", function()
    local p = assert(lr.load_string("max_attempts = 4\ndeadline = 10\npropagate = {}", "=t"))
    local ok, err = pcall(p.begin, p, { virtual = true, inbound = { ["Luaretry-Deadline-Ms"] = "2000\0junk" } })
    assert.is_false(ok)
    has(err, 'inbound["Luaretry-Deadline-Ms"]: the value holds a NUL byte')
    ok, err = pcall(p.begin, p, { virtual = true, inbound = { ["Luaretry-Deadline-Ms\0junk"] = "2000" } })
    assert.is_false(ok)
    has(err, "inbound: a header name holds a NUL byte")
    ok, err = pcall(lr.rate_limit, { RateLimit = '"d";r=0;t=1\0x' })
    assert.is_false(ok)
    has(err, 'rate_limit["RateLimit"]: the value holds a NUL byte')
    assert.is_nil(lr.retry_after("30\0junk", 0))  -- not a wait, as any unreadable value
    assert.are.equal(30, lr.retry_after("30", 0))
    local c = p:begin{ virtual = true }
    ok, err = pcall(c.report, c, { status = 503, headers = { ["Retry-After"] = "1\0x" } })
    assert.is_false(ok)
    has(err, 'outcome.headers["Retry-After"]: the value holds a NUL byte')
    c:close()
  end)
end)

describe("numbers given to the module", function()
  it("a setting keeps its value: 1/3 set as 1/3, not its 14 digits", function()
    local a = assert(lr.load_string("max_attempts = 3\nbackoff = { initial = 1/3, jitter = 'none' }", "=a"))
    local b = assert(lr.load_string("max_attempts = 3\nbackoff = { jitter = 'none' }", "=b",
                                    { set = { ["backoff.initial"] = 1/3 } }))
    assert.are.equal(1/3, b:tuning().backoff.initial)
    assert.are.equal(a:schedule{}[1].wait, b:schedule{}[1].wait)
    assert(b:set("backoff.initial", 0.1 + 0.2))
    assert.are.equal(0.1 + 0.2, b:tuning().backoff.initial)
  end)

  it("a seed below 0 or attempts below 1 is refused, naming it, as the command refuses them", function()
    local p = assert(lr.load_string("max_attempts = 3\nattempt_timeout = 5", "=p"))
    local ok, err = pcall(p.schedule, p, { attempts = 0 })
    assert.is_false(ok)
    has(err, "attempts: 0 is below 1")
    ok, err = pcall(p.schedule, p, { seed = -1 })
    assert.is_false(ok)
    has(err, "seed: -1 is below 0")
    ok, err = pcall(p.begin, p, { virtual = true, seed = -1 })
    assert.is_false(ok)
    has(err, "seed: -1 is below 0")
    assert.are.equal(2, #p:schedule{ attempts = 2 })
  end)
end)

describe("an integer field of an options table", function()
  it("that is no integer is an error naming the field", function()
    local p = assert(lr.load_string("max_attempts = 3", "=p"))
    local cases = {
      { function() return p:begin{ seed = 1.5 } end, "seed: an integer expected, got 1.5" },
      { function() return p:begin{ seed = "x" } end, "seed: an integer expected, got string" },
      { function() return p:begin{ retries = 0.5 } end, "retries: an integer expected, got 0.5" },
      { function() return p:schedule{ attempts = {} } end, "attempts: an integer expected, got table" },
      { function() return p:sample{ n = 1.25 } end, "n: an integer expected, got 1.25" },
      { function() return p:sample{ n = 1, previous = "x" } end, "previous: a number expected, got string" },
    }
    for _, case in ipairs(cases) do
      local ok, err = pcall(case[1])
      assert.is_false(ok)
      has(err, case[2])
    end
    assert.are.equal(2, #p:schedule{ seed = 2, attempts = 2 })
  end)
end)

describe("opts.log", function()
  it("that is no function is an error naming it", function()
    for _, log in ipairs{ "yes", true, 1, {} } do
      local ok, err = pcall(lr.load_string, "max_attempts = 3", "=p", { log = log })
      assert.is_false(ok)
      has(err, "opts.log")
    end
  end)
end)

describe("c:wait", function()
  it("refuses NaN, and +infinity on the virtual clock, saying why; the clock stays", function()
    local p = assert(lr.load_string("max_attempts = 3", "=p"))
    local c = p:begin{ virtual = true, seed = 1 }
    assert.is_true(c:wait(2))
    local ok, err = c:wait(0 / 0)
    assert.is_nil(ok)
    has(err, "NaN seconds")
    ok, err = c:wait(math.huge)
    assert.is_nil(ok)
    has(err, "a wait of +infinity on the virtual clock never ends")
    assert.are.equal(2, c:elapsed())
    c:close()
  end)
end)
