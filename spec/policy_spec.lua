-- Policy scripts: the hooks, the default classifier, validation of every
-- field, warnings, overrides and reloads.
local lr = require "luaretry"

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local FIX = here .. "fixtures/"

local function load(src, opts)
  local p, err = lr.load_string(src, "=policy_spec", opts)
  assert(p, err)
  return p
end

local text = require "support.text"
local line_of, has = text.line_of, text.has

local function fields(s)
  local t = {}
  for k, v in s:gmatch("(%w+)=([^;]*)") do t[k] = v end
  return t
end

describe("is_transient", function()
  it("receives status, body and info", function()
    local p = assert(lr.load(FIX .. "info_probe.lua"))
    local d = p:classify{ status = 503, body = "probe", error = "reset", method = "PUT",
                          url = "https://example.test/x", headers = { ["user-agent"] = "t/1" } }
    assert.are.equal("policy_error", d.verdict)
    local got = fields(assert(d.message:match("is_transient: (.*)")))
    assert.are.same({
      status = "503", body = "probe", attempt = "1", elapsed = "0.0", error = "reset",
      method = "PUT", url = "https://example.test/x", names = "user-agent", ua = "t/1",
      kind = "http", workflow = "false",
    }, got)
  end)

  it("sees header names in lower case", function()
    local p = assert(lr.load(FIX .. "info_probe.lua"))
    local d = p:classify{ status = 503, body = "probe",
                          headers = { ["User-Agent"] = "t/2", ["X-Request-ID"] = "abc" } }
    local got = fields(d.message)
    assert.are.equal("user-agent,x-request-id", got.names)
    assert.are.equal("t/2", got.ua)
  end)

  it("sees info.attempt and info.elapsed of the attempt in progress", function()
    local p = assert(lr.load(FIX .. "info_probe.lua"))
    local c = p:begin{ seed = 1, virtual = true }
    local d1 = c:report{ status = 503 }
    assert.is_true(d1.retry)
    assert.are.equal(2, d1.wait)
    assert.is_string(d1.hook_error) -- this probe's on_retry always fails
    c:wait(d1.wait)
    c:wait(0.5) -- the second attempt lasts half a second
    local d2 = c:report{ status = 500, body = "probe", error = "timeout" }
    local got = fields(d2.message)
    assert.are.equal("2", got.attempt)
    assert.are.equal(2.5, tonumber(got.elapsed))
    assert.are.equal("500", got.status)
    assert.are.equal("timeout", got.error)
    assert.are.equal("nil", got.method)
  end)

  it("returns a number: the wait, from the script", function()
    local p = load([[
      max_attempts = 3
      function is_transient(status) if status == 429 then return 7.25 end return status == 503 end
    ]])
    local d = p:classify{ status = 429 }
    assert.is_true(d.retry)
    assert.are.equal(7.25, d.wait)
    assert.are.equal("script", d.source)
    local z = load([[
      max_attempts = 3
      function is_transient() return 0 end
    ]]):classify{ status = 503 }
    assert.is_true(z.retry)
    assert.are.equal(0, z.wait)
  end)

  it("returning true retries after the backoff, false or nil stops", function()
    local p = load([[
      max_attempts = 3
      backoff = { initial = 3, jitter = "none" }
      function is_transient(status)
        if status == 503 then return true end
        if status == 500 then return false end
        return nil
      end
    ]])
    local d = p:classify{ status = 503 }
    assert.are.equal("retry", d.verdict)
    assert.are.equal(3, d.wait)
    assert.are.equal("backoff", d.source)
    assert.are.equal("final", p:classify{ status = 500 }.verdict)
    assert.are.equal("final", p:classify{ status = 404 }.verdict)
    assert.are.equal("=policy_spec", "=" .. d.rule:match("^(.-):%d+$"))
  end)

  it("a Lua error stops the call as a policy error naming file and line", function()
    local file = FIX .. "hook_error.lua"
    local p = assert(lr.load(file))
    local d = p:classify{ status = 599 }
    assert.is_false(d.retry)
    assert.are.equal("policy_error", d.verdict)
    has(d.message, "hook_error.lua:" .. line_of("hook_error.lua", "index") .. ":")
    has(d.message, "nil value")
    local e = p:classify{ status = 598 }
    assert.are.equal("policy_error", e.verdict)
    has(e.message, "hook_error.lua:" .. line_of("hook_error.lua", "error") .. ": deliberate failure")
    -- never treated as transient: p:run stops after the first attempt
    local calls = 0
    local r = p:run(function() calls = calls + 1; return 599 end, { seed = 1, virtual = true })
    assert.are.equal(1, calls)
    assert.are.equal("policy_error", r.verdict)
    -- and the policy serves the next call
    assert.are.equal("retry", p:classify{ status = 503 }.verdict)
  end)

  it("returning a string, a table, a negative number, NaN or inf is a policy error", function()
    local p = load([[
      max_attempts = 3
      function is_transient(status)
        if status == 1 then return "yes" end
        if status == 2 then return {} end
        if status == 3 then return -1 end
        if status == 4 then return 0/0 end
        if status == 5 then return math.huge end
        if status == 6 then return print end
        return true
      end
    ]])
    for status = 1, 6 do
      local d = p:classify{ status = status }
      assert.are.equal("policy_error", d.verdict, "status " .. status)
      assert.is_false(d.retry)
      has(d.message, "is_transient returned")
      has(d.message, "policy_spec:2")
    end
    assert.are.equal("retry", p:classify{ status = 503 }.verdict)
  end)
end)

describe("is_success", function()
  it("overrides the 200-399 success rule", function()
    local p = load([[
      max_attempts = 3
      function is_success(status, body) return status == 202 or body == "done" end
    ]])
    assert.are.equal("success", p:classify{ status = 202 }.verdict)
    assert.are.equal("success", p:classify{ status = 503, body = "done" }.verdict)
    -- 200 is no longer a success: the default classifier calls it final
    local d = p:classify{ status = 200 }
    assert.are.equal("final", d.verdict)
    assert.are.equal("retry", p:classify{ status = 503 }.verdict)
  end)

  it("a bad value or an error from it is a policy error", function()
    local p = load([[
      max_attempts = 3
      function is_success(status)
        if status == 1 then return "ok" end
        if status == 2 then error("no") end
        return false
      end
    ]])
    assert.are.equal("policy_error", p:classify{ status = 1 }.verdict)
    assert.are.equal("policy_error", p:classify{ status = 2 }.verdict)
  end)
end)

describe("on_retry", function()
  it("receives attempt, status, delay and elapsed; its error shows and the call retries", function()
    local p = assert(lr.load(FIX .. "info_probe.lua"))
    local c = p:begin{ seed = 1, virtual = true }
    local d1 = c:report{ status = 503 }
    assert.is_true(d1.retry)
    assert.are.equal("retry", d1.verdict)
    local got = fields(assert(d1.hook_error:match("on_retry: (.*)")))
    assert.are.same({ attempt = "1", status = "503", delay = "2.0", elapsed = "0.0",
                      error = "nil" }, got)
    c:wait(d1.wait)
    local d2 = c:report{ status = 0, error = "connect" }
    assert.is_true(d2.retry)
    got = fields(d2.hook_error)
    assert.are.same({ attempt = "2", status = "0", delay = "4.0", elapsed = "2.0",
                      error = "connect" }, got)
  end)

  it("a runtime error names file and line and does not change the decision", function()
    local p = assert(lr.load(FIX .. "hook_error.lua"))
    local d = p:classify{ status = 502 }
    assert.is_true(d.retry)
    assert.are.equal("retry", d.verdict)
    assert.are.equal(1, d.wait)
    has(d.hook_error, "hook_error.lua:" .. line_of("hook_error.lua", "on_retry") .. ": on_retry is broken")
    local quiet = p:classify{ status = 503 }
    assert.is_true(quiet.retry)
    assert.is_nil(quiet.hook_error)
  end)

  it("is not called when the call stops", function()
    local p = load([[
      max_attempts = 1
      function on_retry() error("must not run") end
    ]])
    local d = p:classify{ status = 503 }
    assert.are.equal("exhausted", d.verdict)
    assert.is_nil(d.hook_error)
  end)
end)

describe("a backoff function", function()
  it("gives the waits, with n and the previous wait", function()
    local p = load([[
      max_attempts = 6
      backoff = function(n, previous) return previous * 2 + 1 + n / 10 end
    ]])
    local s = p:schedule{ seed = 1 }
    local expected, previous = {}, 0
    for n = 0, 4 do
      previous = previous * 2 + 1 + n / 10
      expected[#expected + 1] = previous
    end
    for i = 1, 5 do
      assert.are.equal(expected[i], s[i].wait)
      assert.are.equal("backoff", s[i].source)
    end
    assert.are.equal("exhausted", s[6].verdict)
    assert.are.equal("function", p:tuning().backoff.kind)
  end)

  it("returning a bad value or failing is a policy error", function()
    for _, body in ipairs{ "return -1", "return 'soon'", "return 0/0", "error('nope')" } do
      local p = load("max_attempts = 3\nbackoff = function(n, previous) " .. body .. " end\n")
      local d = p:classify{ status = 503 }
      assert.are.equal("policy_error", d.verdict, body)
      assert.is_false(d.retry)
      has(d.message, "backoff")
    end
  end)

  it("cannot be combined with backoff fields, and cannot be sampled", function()
    local p = load("max_attempts = 3\nbackoff = function() return 1 end\n")
    assert.has_error(function() p:sample{ n = 0 } end)
    local q, err = lr.load_string("max_attempts = 3\nbackoff = function() return 1 end\n",
                                  "=x", { set = { ["backoff.initial"] = 2 } })
    assert.is_nil(q)
    has(err, "backoff.initial")
  end)
end)

describe("the default classifier", function()
  local p = load("max_attempts = 3\n")

  it("retries 408, 429, 500, 502, 503 and 504", function()
    for _, s in ipairs{ 408, 429, 500, 502, 503, 504 } do
      local d = p:classify{ status = s }
      assert.are.equal("retry", d.verdict, "status " .. s)
      assert.are.equal("default", d.rule)
    end
  end)

  it("retries every transport failure (status 0)", function()
    for _, e in ipairs{ "connect", "timeout", "reset", "dns", "tls" } do
      assert.are.equal("retry", p:classify{ status = 0, error = e }.verdict, e)
    end
    assert.are.equal("retry", p:classify{ status = 0 }.verdict)
  end)

  it("calls 200-399 a success and other statuses final", function()
    for _, s in ipairs{ 200, 201, 204, 301, 304, 399 } do
      assert.are.equal("success", p:classify{ status = s }.verdict, "status " .. s)
    end
    for _, s in ipairs{ 400, 401, 403, 404, 409, 501, 505, 199 } do
      assert.are.equal("final", p:classify{ status = s }.verdict, "status " .. s)
    end
  end)

  it("judges commands by exit status", function()
    assert.are.equal("success", p:classify{ kind = "command", status = 0 }.verdict)
    assert.are.equal("retry", p:classify{ kind = "command", status = 1 }.verdict)
  end)
end)

describe("validation", function()
  local function refused(src, ...)
    local p, err, name = lr.load_string(src, "=bad")
    assert.is_nil(p)
    assert.are.equal("policy is invalid", name)
    for _, needle in ipairs{ ... } do has(err, needle) end
    return err
  end

  it("refuses a wrong type, naming the field", function()
    refused('max_attempts = "3"', "max_attempts", 'got "3"')
    refused('max_attempts = 3\nretry_after = "yes"', "retry_after")
    refused('max_attempts = 3\nbackoff = 5', "backoff")
    refused('max_attempts = 3\nis_transient = true', "is_transient")
    refused('max_attempts = 3\nbackoff = { initial = "1" }', "backoff.initial")
  end)

  -- a table of settings with positional entries set nothing: its
  -- defaults were taken, and check said ok
  it("refuses a positional entry in a table of settings, naming the setting and the line", function()
    refused("max_attempts = 3\nbreaker = { slow_call = {5, 0.5} }",
            "bad:2: breaker.slow_call: expected named fields (seconds = ..., rate = ...), got a positional value")
    refused("max_attempts = 3\nbackoff = {0.1, 2, 5}",
            "bad:2: backoff: expected named fields (kind = ..., initial = ...", "got a positional value")
    refused("max_attempts = 3\nbudget = {20}",
            "bad:2: budget: expected named fields (max_tokens = ..., token_ratio = ...", "got a positional value")
    refused("max_attempts = 3\nthrottle_backoff = { 1, max = 3 }", "bad:2: throttle_backoff: expected named fields")
    refused("max_attempts = 3\nfleet = { [true] = 1 }", "bad:2: fleet: expected named fields (key = ..., sync = ...), got a boolean as a key")
    refused("return { max_attempts = 3, hedge = {0.1} }", "bad: hedge: expected named fields")
    -- named fields, an empty table and a script's own options stay as they were
    assert.is_truthy(lr.load_string("max_attempts = 3\nbreaker = { slow_call = { seconds = 5, rate = 0.5 } }\n"
                                    .. "budget = {}\noptions = { 1, 2 }", "=ok"))
  end)

  -- a returned table's positional entry was ignored in silence
  it("refuses an entry with no name in the returned table, naming it", function()
    refused('return { max_attempts = 3, deadline = 5, "pos" }',
            'bad: the returned table holds an entry with no name ([1] = "pos"): a policy\'s fields are named')
    refused("return { max_attempts = 3, [true] = {} }", "bad: the returned table holds an entry with no name (a boolean key = a table)")
    refused("return { max_attempts = 3, [2.5] = 1 }", "(a number key = a number)")
    assert.is_truthy(lr.load_string("return { max_attempts = 3, deadline = 5 }", "=ok"))
  end)

  -- no attempt starts in a deadline's last millisecond: one of 1 ms or
  -- less could never make one
  it("refuses a deadline of 1 ms or less", function()
    refused("max_attempts = 3\ndeadline = 0.001", "deadline: expected a finite number of seconds above 0.001, got 0.001")
    refused("max_attempts = 3\ndeadline = 0.0005", "deadline", "0.0005")
    assert.is_truthy(lr.load_string("max_attempts = 3\ndeadline = 0.002", "=ok"))
  end)

  it("refuses negative, NaN and infinite numbers", function()
    refused("deadline = -1", "deadline", "-1")
    refused("max_attempts = 3\ndeadline = 0/0", "deadline")
    refused("max_attempts = math.huge", "max_attempts", "inf")
    refused("deadline = math.huge", "deadline", "inf")
    refused("max_attempts = 3\nbackoff = { max = math.huge }", "backoff.max")
    refused("max_attempts = 3\nbackoff = { initial = -1 }", "backoff.initial")
    refused("max_attempts = 3\nbackoff = { multiplier = 0/0 }", "backoff.multiplier")
    refused("max_attempts = 3\nbackoff = { jitter_max = -0.5 }", "backoff.jitter_max")
    refused("max_attempts = 3\nattempt_timeout = -2", "attempt_timeout")
  end)

  it("refuses unknown jitter and kind names", function()
    refused('max_attempts = 3\nbackoff = { jitter = "wobbly" }', "backoff.jitter", '"wobbly"')
    refused('max_attempts = 3\nbackoff = { kind = "spiral" }', "backoff.kind", '"spiral"')
  end)

  it("refuses max below initial, throttle_backoff's too, naming the line", function()
    refused("max_attempts = 3\nbackoff = { initial = 10, max = 5 }", "backoff.max",
            "below backoff.initial")
    refused('max_attempts = 3\nthrottle_backoff = { initial = 100, max = 1, jitter = "none" }',
            "bad:2: throttle_backoff.max: 1 is below throttle_backoff.initial (100)")
    refused("max_attempts = 3\nthrottle_backoff = { max = 0.5 }",
            "bad:2: throttle_backoff.max: 0.5 is below throttle_backoff.initial (1)")
    -- the default cap (20) still rises to an initial above it
    local p = assert(lr.load_string('max_attempts = 3\nthrottle_backoff = { initial = 30, jitter = "none" }',
                                    "=ok"))
    assert.are.equal(30, p:begin{ virtual = true, seed = 1 }:report{ status = 429 }.wait)
    local bad, err = p:set("throttle_backoff.max", "2")
    assert.is_nil(bad)
    has(err, "throttle_backoff.max: 2 is below throttle_backoff.initial (30)")
  end)

  it("refuses a max_attempts that is not a whole number from 1", function()
    refused("max_attempts = 2.5", "max_attempts", "2.5")
    refused("max_attempts = 0", "max_attempts")
    refused("max_attempts = -3", "max_attempts")
  end)

  it("refuses a policy with neither max_attempts nor deadline", function()
    refused("backoff = { initial = 1 }", "neither max_attempts nor deadline")
    refused("", "neither max_attempts nor deadline")
    assert.is_truthy(lr.load_string("deadline = 10"))
    assert.is_truthy(lr.load_string("max_attempts = 10"))
  end)

  it("refuses memory_limit and instruction_limit set by a script", function()
    refused("max_attempts = 3\nmemory_limit = 1e9", "memory_limit", "set by the host")
    refused("max_attempts = 3\ninstruction_limit = 1e12", "instruction_limit", "set by the host")
  end)

  it("refuses malformed overload guards", function()
    refused("max_attempts = 3\nbudget = 10", "budget", "a table")
    refused("max_attempts = 3\nbudget = { max_tokens = -1 }", "budget.max_tokens", "above 0")
    refused("max_attempts = 3\nbreaker = { failures = 0 }", "breaker.failures", "whole number")
    refused("max_attempts = 3\nbreaker = { open_seconds = 0/0 }", "breaker.open_seconds", "finite")
  end)

  it("reports every mistake of a file, each with its line", function()
    local file = "many_mistakes.lua"
    local p, err, name = lr.load(FIX .. file)
    assert.is_nil(p)
    assert.are.equal("policy is invalid", name)
    local function at(mark, field)
      has(err, ("%s:%d: %s"):format(file, line_of(file, mark), field))
    end
    at("max_attempts", "max_attempts")
    at("deadline", "deadline")
    at("attempt_timeout", "attempt_timeout")
    at("max_retry_after", "max_retry_after")
    at("backoff", "backoff.kind")
    at("backoff", "backoff.jitter")
    at("backoff", "backoff.max")
    at("body_limit", "body_limit")
    local lines = 0
    for _ in err:gmatch("[^\n]+") do lines = lines + 1 end
    assert.are.equal(8, lines)
  end)

  it("a syntax error is its own kind of failure, with the line", function()
    local p, err, name = lr.load(FIX .. "reload_syntax.lua")
    assert.is_nil(p)
    assert.are.equal("policy script does not compile", name)
    has(err, "reload_syntax.lua:2:")
  end)
end)

describe("warnings", function()
  it("names unknown names with \"did you mean\", and the line", function()
    local file = "typos.lua"
    local p = assert(lr.load(FIX .. file))
    local w = table.concat(p:warnings(), "\n")
    has(w, ("%s:%d: max_attemps: unknown name, did you mean max_attempts?")
           :format(file, line_of(file, "max_attemps")))
    has(w, ("%s:%d: backoff.intial: unknown name, did you mean backoff.initial?")
           :format(file, line_of(file, "backoff")))
    has(w, ("%s:%d: frobnicate: unknown name"):format(file, line_of(file, "frobnicate")))
    assert.is_falsy(w:find("frobnicate: unknown name, did you mean", 1, true))
    assert.are.equal(3, #p:warnings())
    -- a typo is not a setting: the defaults stay
    local t = p:tuning()
    assert.is_nil(t.max_attempts)
    assert.are.equal(60, t.deadline)
    assert.are.equal(1, t.backoff.initial)
  end)

  it("warns of settings that have no effect", function()
    local p = load('max_attempts = 3\nbackoff = { kind = "constant", multiplier = 3, jitter = "none", jitter_max = 2 }')
    local w = table.concat(p:warnings(), "\n")
    has(w, "backoff.multiplier: has no effect")
    has(w, "backoff.jitter_max: has no effect")
  end)

  it("does not warn of the script's locals or of a clean policy", function()
    local p = load("local helper = 1\nmax_attempts = 3\ndeadline = 30\n")
    assert.are.same({}, p:warnings())
  end)

  it("reads a returned table like globals", function()
    local p = load([[return {
      max_attempts = 4, maxx_attempts = 1,
      backoff = { initial = 0.5, jitter = 'none' },
      is_transient = function(status) return status == 404 end,
    }]])
    assert.are.equal(4, p:tuning().max_attempts)
    assert.are.equal(0.5, p:sample{ n = 0 }[1])
    assert.are.equal("retry", p:classify{ status = 404 }.verdict)
    assert.are.equal("final", p:classify{ status = 503 }.verdict)
    has(table.concat(p:warnings(), "\n"), "maxx_attempts: unknown name, did you mean max_attempts?")
  end)
end)

describe("overrides", function()
  local SRC = "max_attempts = 5\nbackoff = { initial = 1, max = 32, jitter = 'none' }\n"

  it("opts.set applies valid values", function()
    local p = load(SRC, { set = { max_attempts = 3, ["backoff.initial"] = 0.25 } })
    local t = p:tuning()
    assert.are.equal(3, t.max_attempts)
    assert.are.equal(0.25, t.backoff.initial)
    assert.are.equal(3, #p:schedule{ seed = 1 })
    assert.are.equal(0.25, p:schedule{ seed = 1 }[1].wait)
  end)

  it("opts.set refuses bad values, naming the field", function()
    for name, value in pairs{ max_attempts = "three", deadline = -1, ["backoff.jitter"] = "wobbly",
                              ["backoff.initial"] = "nan", ["backoff.max"] = "inf" } do
      local p, err = lr.load_string(SRC, "=x", { set = { [name] = value } })
      assert.is_nil(p, name)
      has(err, name)
    end
    local p, err = lr.load_string(SRC, "=x", { set = { max_attemps = 3 } })
    assert.is_nil(p)
    has(err, "did you mean max_attempts?")
  end)

  it("p:set validates and leaves the policy unchanged when refused", function()
    local p = load(SRC)
    local ok, err = p:set("max_attempts", "2.5")
    assert.is_nil(ok)
    has(err, "max_attempts")
    ok, err = p:set("backoff.max", 0.5)
    assert.is_nil(ok)
    has(err, "backoff.max")
    ok, err = p:set("deadline", "-3")
    assert.is_nil(ok)
    assert.are.equal(5, p:tuning().max_attempts)
    assert.is_nil(p:tuning().deadline)
    assert.are.equal(32, p:tuning().backoff.max)
    assert.are.equal(5, #p:schedule{ seed = 1 })
    assert.are.equal("retry", p:classify{ status = 503 }.verdict)
  end)

  it("p:set takes effect at once when valid", function()
    local p = load(SRC)
    assert.is_true(p:set("max_attempts", 2))
    assert.is_true(p:set("backoff.initial", 4))
    assert.are.equal(2, #p:schedule{ seed = 1 })
    assert.are.equal(4, p:schedule{ seed = 1 }[1].wait)
    assert.is_true(p:set("deadline", 10))
    assert.is_true(p:set("max_attempts", "none"))
    assert.is_nil(p:tuning().max_attempts)
    assert.are.equal("deadline", p:schedule{ seed = 1 }[2].verdict) -- 4 + 8 > 10
    -- unsetting both limits is refused
    local ok = p:set("deadline", "none")
    assert.is_nil(ok)
    assert.are.equal(10, p:tuning().deadline)
  end)

  -- The names were once gathered into a luaL_Buffer with lua_next's key
  -- above it: past the buffer's first 1 KB liblua took the key's slot for
  -- its box and the load failed with "invalid key to 'next'".
  it("an unknown script option names every option the script has, in order, however many", function()
    local names, lines = {}, {}
    for i = 80, 1, -1 do
      names[#names + 1] = ("option_number_%03d_with_a_long_name"):format(81 - i)
      lines[#lines + 1] = ("  option_number_%03d_with_a_long_name = %d,"):format(i, i)
    end
    local src = "max_attempts = 3\noptions = {\n" .. table.concat(lines, "\n") .. "\n}\n"
    local p, err = lr.load_string(src, "=many", { set = { ["options.bogus"] = 1 } })
    assert.is_nil(p)
    has(err, "options.bogus: unknown option (the script's options: " .. table.concat(names, ", ") .. ")")
    p, err = lr.load_string(src, "=many", { set = { ["options.option_number_007_with_a_long_name"] = "x" } })
    assert.is_nil(p)
    has(err, "options.option_number_007_with_a_long_name: expected a number, got \"x\"")
  end)

  it("outlive a reload", function()
    local p = load(SRC, { set = { max_attempts = 3 } })
    assert.is_true(p:reload("max_attempts = 9\n", "=again"))
    assert.are.equal(3, p:tuning().max_attempts)
  end)
end)

describe("reload", function()
  it("a good reload takes effect", function()
    local p = assert(lr.load(FIX .. "reload_v1.lua"))
    assert.are.equal("v1", p:tuning().name)
    assert.are.equal("final", p:classify{ status = 404 }.verdict)
    assert.is_true(p:reload(FIX .. "reload_v2.lua"))
    local t = p:tuning()
    assert.are.equal("v2", t.name)
    assert.are.equal(7, t.max_attempts)
    local d = p:classify{ status = 404 }
    assert.are.equal("retry", d.verdict)
    assert.are.equal(3, d.wait)
    has(d.rule, "reload_v2.lua:")
  end)

  it("a failed reload keeps the old policy working", function()
    local p = assert(lr.load(FIX .. "reload_v2.lua"))
    for _, bad in ipairs{ "reload_syntax.lua", "reload_invalid.lua", "does_not_exist.lua" } do
      local ok, err = p:reload(FIX .. bad)
      assert.is_nil(ok, bad)
      assert.is_string(err)
    end
    local ok, err = p:reload("while true do end", "=spin")
    assert.is_nil(ok)
    has(err, "time limit")
    ok = p:reload("max_attempts = 'x'", "=typed")
    assert.is_nil(ok)
    local t = p:tuning()
    assert.are.equal("v2", t.name)
    assert.are.equal(7, t.max_attempts)
    assert.are.equal("retry", p:classify{ status = 404 }.verdict)
    assert.are.equal(7, #p:schedule{ seed = 1 })
  end)

  it("reloads from a string with a chunk name", function()
    local p = assert(lr.load(FIX .. "reload_v1.lua"))
    assert.is_true(p:reload("max_attempts = 4\nfunction is_transient() return false end\n", "@inline.lua"))
    local d = p:classify{ status = 503 }
    assert.are.equal("final", d.verdict)
    assert.are.equal("inline.lua:2", d.rule)
  end)
end)
