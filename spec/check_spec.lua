-- `luaretry check POLICY...`: every problem of every file, the tuning, and
-- the verdict table over the probe outcomes.  Runs the real build/luaretry
-- (LUARETRY_BIN if set).
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
local proc = require "support.proc"

local root = proc.root
local FIX = here .. "/fixtures/"
local HTTP = root .. "/policies/http.lua"

local function check(args, timeout)
  return proc.run({ "check", table.unpack(args) }, { timeout = timeout or 60 })
end

-- The line numbers of "MARK:name" comments in a fixture.
local function marks(path)
  local t, n = {}, 0
  for line in io.lines(path) do
    n = n + 1
    local name = line:match("MARK:([%w_.]+)")
    if name then t[name] = n end
  end
  return t
end

-- The verdict table of one block: rows[probe] = {verdict, wait, rule}.
local function table_rows(out)
  local rows, on = {}, false
  for _, line in ipairs(proc.lines(out)) do
    if line:match("^  probe%s+verdict%s+wait%s+rule$") then
      on = true
    elseif on then
      local probe, rest = line:match("^  (exit %w+)%s+(.*)$")
      if not probe then probe, rest = line:match("^  (%d+ [%a_]+)%s%s+(.*)$") end
      if not probe then probe, rest = line:match("^  (%d+)%s+(.*)$") end
      if not probe then break end
      local verdict, wait, rule = rest:match("^(%S+)%s+(.-)%s%s+(%S+)$")
      rows[probe] = { verdict = verdict, wait = wait, rule = rule }
    end
  end
  return rows
end

local PROBES = { "200", "400", "401", "403", "404", "408", "409", "429", "500", "501", "502",
                 "503", "504", "0 connect", "0 timeout", "0 reset", "0 dns", "0 tls",
                 "0 tls_verify" }
-- a command's policy's built-in probes: exit statuses (check_probe_spec)
local COMMAND_PROBES = { "exit 0", "exit 1", "exit 2", "exit 75", "exit 126", "exit 127", "exit 130",
                         "exit 137", "exit 143", "exit timeout" }

local function shipped()
  local files = {}
  local p = io.popen("ls " .. proc.q(root .. "/policies") .. "/*.lua 2>/dev/null")
  for line in p:lines() do files[#files + 1] = line end
  p:close()
  table.sort(files)
  return files
end

describe("luaretry check", function ()
  it("reports all three planted mistakes, each with its name and line; exit 3", function ()
    local path = FIX .. "k_three_mistakes.lua"
    local m = marks(path)
    local r = check({ path })
    assert.are.equal(3, r.code, r.stdout .. r.stderr)
    assert.matches("does not load %(3 problems%)", r.stdout)
    local function has(name, what)
      local line = path .. ":" .. m[name] .. ": " .. name .. ": "
      assert.truthy(r.stdout:find(line, 1, true), "no '" .. line .. "' in:\n" .. r.stdout)
      assert.truthy(r.stdout:find(line .. what, 1, true), what .. " in:\n" .. r.stdout)
    end
    has("attempt_timout", "unknown name, did you mean attempt_timeout?")
    has("deadline", "expected")
    has("backoff.jitter", "expected")
    assert.truthy(r.stdout:find('"wobbly"', 1, true))
    assert.truthy(r.stdout:find("-30", 1, true))
  end)

  it("reports unknown names of a policy that loads (with the closest known name); exit 3", function ()
    local path = FIX .. "typos.lua"
    local m = marks(path)
    local r = check({ path })
    assert.are.equal(3, r.code, r.stdout)
    assert.matches("loads, 3 problems", r.stdout)
    assert.truthy(r.stdout:find("warning: " .. path .. ":" .. m.max_attemps ..
      ": max_attemps: unknown name, did you mean max_attempts?", 1, true), r.stdout)
    assert.truthy(r.stdout:find(":" .. m.frobnicate .. ": frobnicate: unknown name", 1, true))
    -- it loaded: the table follows the problems
    local rows = table_rows(r.stdout)
    assert.are.equal("retry", rows["503"].verdict)
  end)

  it("refuses a policy with neither max_attempts nor deadline", function ()
    local r = check({ FIX .. "k_forever.lua" })
    assert.are.equal(3, r.code)
    assert.matches("does not load", r.stdout)
    assert.matches("could retry forever", r.stdout)
    assert.is_nil(r.stdout:find("probe%s+verdict"), "no table for a policy that does not load")
  end)

  it("warns about a policy in which one attempt could last for ever", function ()
    local r = check({ FIX .. "k_no_timeout.lua" })
    assert.are.equal(3, r.code)
    assert.matches("loads, 1 problem", r.stdout)
    assert.matches("warning: [^\n]*neither attempt_timeout nor deadline is set: one attempt could last for ever",
                   r.stdout)
    for _, set in ipairs({ "attempt_timeout=10", "deadline=60" }) do
      local fixed = check({ FIX .. "k_no_timeout.lua", "--set", set })
      assert.are.equal(0, fixed.code, set .. ": " .. fixed.stdout)
      assert.is_nil(fixed.stdout:find("warning"), set)
    end
  end)

  local files = shipped()
  it("finds the shipped policies", function ()
    assert.is_true(#files >= 1)
  end)
  for _, path in ipairs(files) do
    it("the shipped " .. path:match("policies/.*$") .. " is clean: exit 0, every probe judged", function ()
      local r = check({ path })
      assert.are.equal(0, r.code, r.stdout .. r.stderr)
      assert.are.equal(path .. ": ok", proc.lines(r.stdout)[1])
      assert.is_nil(r.stdout:find("warning:", 1, true))
      local rows = table_rows(r.stdout)
      local command = path:match("/command%.lua$") ~= nil
      for _, probe in ipairs(command and COMMAND_PROBES or PROBES) do
        assert.truthy(rows[probe], "no row for " .. probe .. " in:\n" .. r.stdout)
        assert.are_not.equal("policy_error", rows[probe].verdict, probe)
      end
      -- no retry makes a certificate that does not verify good, nor one
      -- that cannot be executed
      if command then assert.are.equal("final", rows["exit 126"].verdict)
      else assert.are.equal("final", rows["0 tls_verify"].verdict) end
    end)
  end

  it("the verdict table of policies/http.lua: 503 retry, 404 final, transport failures retry", function ()
    local r = check({ HTTP })
    assert.are.equal(0, r.code)
    local rows = table_rows(r.stdout)
    assert.are.equal("retry", rows["503"].verdict)
    assert.are.equal("backoff", rows["503"].wait)
    assert.matches("^.*policies/http%.lua:%d+$", rows["503"].rule)
    assert.are.equal("final", rows["404"].verdict)
    assert.are.equal("-", rows["404"].wait)
    assert.are.equal("success", rows["200"].verdict)
    for _, e in ipairs { "connect", "timeout", "reset", "dns", "tls" } do
      assert.are.equal("retry", rows["0 " .. e].verdict, e)
    end
    assert.are.equal("final", rows["0 tls_verify"].verdict)
    -- the tuning, in two lines
    assert.matches("\n  tuning: name http; max_attempts 10, deadline 300 s", r.stdout)
    assert.matches("\n  backoff: exponential 1 s x2, max 32 s, jitter additive %(up to 1 s%)", r.stdout)
  end)

  it("the default rule: every transport failure is retried but tls_verify", function ()
    local dir = proc.tmpdir()
    finally(function () proc.rmtree(dir) end)
    local path = dir .. "/plain.lua"
    proc.writefile(path, "max_attempts = 3\ndeadline = 10\nattempt_timeout = 5\n")
    local r = check({ path })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local rows = table_rows(r.stdout)
    for _, e in ipairs { "connect", "timeout", "reset", "dns", "tls" } do
      assert.are.equal("retry", rows["0 " .. e].verdict, e)
    end
    assert.are.equal("final", rows["0 tls_verify"].verdict)
    assert.are.equal("default", rows["0 tls_verify"].rule)
  end)

  it("shows a wait the script chose, and reports a probe the classifier fails on", function ()
    local path = FIX .. "k_script_wait.lua"
    local r = check({ path })
    assert.are.equal(3, r.code, r.stdout)
    assert.matches("loads, 1 problem\n", r.stdout)
    local rows = table_rows(r.stdout)
    assert.are.equal("retry", rows["429"].verdict)
    assert.are.equal("after 2.5 s", rows["429"].wait)
    assert.are.equal("policy_error", rows["409"].verdict)
    assert.truthy(r.stdout:find("error: probe 409: " .. path .. ":%d+: is_transient returned a string"),
                  r.stdout)
  end)

  it("a rule between two fields broken by --set names the --set, not only the other field's line", function ()
    local r = check({ HTTP, "--set", "backoff.initial=40" })
    assert.are.equal(3, r.code, r.stdout)
    assert.matches("http%.lua:%d+: backoff%.max: 32 is below backoff%.initial %(40%) %(backoff%.initial from %-%-set%)\n",
                   r.stdout)
    -- both from --set: said at the one compared, as a --set
    r = check({ HTTP, "--set", "backoff.initial=40", "--set", "backoff.max=20" })
    assert.are.equal(3, r.code, r.stdout)
    assert.matches("\n  %-%-set backoff%.max: 20 is below backoff%.initial %(40%)\n", r.stdout)
  end)

  it("a newline in a policy's file name or in a probe never splits a line: every message shows it as \\x0a", function ()
    local dir = proc.tmpdir()
    finally(function () proc.rmtree(dir) end)
    local path = dir .. "/two\nlines.lua"
    proc.writefile(path, 'max_attempts = 2\nfunction is_transient(status) return status >= 500 end\n')
    local r = check({ path, dir .. "/gone\nfile.lua", "--probe", "503 body=a\nb" })
    assert.are.equal(3, r.code, r.stdout)
    -- the warning (no deadline) names the file on its own line, as the heading does
    assert.matches("\n  warning: [^\n]*/two\\x0alines%.lua: neither attempt_timeout nor deadline", r.stdout)
    assert.matches("\n  [^\n]*/gone\\x0afile%.lua: cannot open: No such file", r.stdout)
    assert.matches("\n  503 body=a\\x0ab +retry ", r.stdout)
    -- every line of the output is one of check's: a heading, or indented
    for line in r.stdout:gmatch("[^\n]+") do
      assert.is_truthy(line:match("^  ") or line:match("^/") or line:match("^%d+ files: "), line)
    end
    -- a probe that does not parse: the usage error is one line too
    r = check({ path, "--probe", "503\nX" })
    assert.are.equal(2, r.code, r.stderr)
    assert.matches("^luaretry: check: %-%-probe '503\\x0aX': no status", r.stderr)
  end)

  it("control bytes of the policy (file name, name, its errors, a source that does not load) reach the output escaped", function ()
    local dir = proc.tmpdir()
    finally(function () proc.rmtree(dir) end)
    local loads = dir .. "/evil\27[2J.lua"
    proc.writefile(loads, 'name = "n\\27]0;title\\7"\nmax_attempts = 2\ndeadline = 10\nattempt_timeout = 5\n' ..
                          'function is_transient(status)\n' ..
                          '  if status == 404 then error("\\27[31mred\\r\\155x", 0) end\n  return false\nend\n')
    local broken = dir .. "/broken.lua"
    proc.writefile(broken, 'max_attempts = 2\nx = "\27[2J\194\155\n')
    local r = check({ loads, broken })
    assert.are.equal(3, r.code, r.stdout)
    -- no control byte but newline, no C1 control, and nothing that is not UTF-8
    assert.is_nil(r.stdout:find("[\0-\9\11-\31\127]"), r.stdout)
    assert.is_nil(r.stdout:find("\194[\128-\159]"), r.stdout)
    assert.is_truthy(utf8.len(r.stdout), r.stdout)
    assert.matches("evil\\x1b%[2J%.lua: loads, 1 problem\n", r.stdout)
    assert.matches("tuning: name n\\x1b%]0;title\\x07;", r.stdout)
    assert.matches("error: probe 404: is_transient: \\x1b%[31mred\\x0d\\x9bx\n", r.stdout)
    assert.matches("broken%.lua: does not load", r.stdout)
    assert.matches("\\x1b%[2J\\xc2\\x9b", r.stdout)
    -- run says why a policy does not load the same way
    r = proc.run({ "run", broken, "http://127.0.0.1:1/" }, { timeout = 30 })
    assert.are.equal(3, r.code, r.stderr)
    assert.matches("unfinished string near '\"\\x1b%[2J\\xc2\\x9b'", r.stderr)
    assert.is_nil(r.stderr:find("[\0-\9\11-\31\127]"), r.stderr)
  end)

  it("applies --set like run; an invalid override is a problem of the file", function ()
    local r = check({ HTTP, "--set", "max_attempts=3", "--set", "backoff.jitter=none" })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.matches("max_attempts 3,", r.stdout)
    assert.matches("jitter none", r.stdout)
    r = check({ HTTP, "--set", "max_attempts=-2" })
    assert.are.equal(3, r.code)
    assert.matches("max_attempts", r.stdout)
    r = check({ HTTP, "--set", "noequals" })
    assert.are.equal(2, r.code)
  end)

  it("one block per file; exit 3 when any file has a problem", function ()
    local r = check({ HTTP, FIX .. "k_forever.lua" })
    assert.are.equal(3, r.code)
    assert.matches("^" .. HTTP:gsub("%p", "%%%0") .. ": ok\n", r.stdout)
    assert.matches("\n" .. (FIX .. "k_forever.lua"):gsub("%p", "%%%0") .. ": does not load", r.stdout)
    assert.matches("2 files: 1 clean, 1 with problems\n$", r.stdout)
    r = check({ FIX .. "no_such_file.lua" })
    assert.are.equal(3, r.code)
    assert.matches("does not load", r.stdout)
  end)

  it("usage errors exit 2", function ()
    assert.are.equal(2, check({}).code)
    assert.are.equal(2, check({ "--frob", HTTP }).code)
  end)
end)

-- The collector frees garbage before the memory limit counts it: a
-- classifier whose live data stays under 6 MiB (3 MiB kept, 12 temporaries
-- of 2 MiB made and dropped on each call) under the 8 MiB limit passes every
-- probe of `check`, one after the other on the same state, whichever way
-- it makes its temporaries (issue 30, finding 8).
describe("luaretry check under the memory limit", function ()
  local MAKERS = {
    rep = 'string.rep("t", 2 * MiB)',                   -- a buffer of lauxlib's
    concat = 'half .. half',                             -- the VM's concatenation
    format = 'string.format("%s%s", half, half)',        -- a buffer, grown
    table = '(function () local t = {} for k = 1, 2 * MiB // 16 do t[k] = k end return t end)()',
  }
  -- lauxlib's buffers grow through the allocator, where Lua's emergency
  -- collection never runs: garbage first (3 MiB), then a 2 MiB string.rep,
  -- 7 MiB live at most
  it("frees the garbage before a buffer counts it against the limit, probe after probe", function ()
    local dir = proc.tmpdir()
    local path = dir .. "/gc_buffer.lua"
    proc.writefile(path, table.concat({
      "max_attempts = 3", "attempt_timeout = 5", "local MiB = 1024 * 1024",
      'local keep = string.rep("k", 3 * MiB)', "function is_transient(status, body, info)",
      "  local n = 0", '  for i = 1, 3 do n = n + #string.rep("g", MiB) end',
      '  n = n + #string.rep("t", 2 * MiB) + #table.concat({ ("c"):rep(MiB), "x" })',
      "  return status >= 500 and n > 0 and #keep > 0", "end", "" }, "\n"))
    local r = check({ path, "--set", "time_limit=30" }, 600) -- memory, not time: ASan at load 12 is slow
    proc.rmtree(dir)
    assert.is_nil((r.stdout .. r.stderr):find("memory limit", 1, true), r.stdout .. r.stderr)
    assert.is_nil(r.stdout:find("policy_error", 1, true), r.stdout .. r.stderr)
    assert.is_truthy(r.stdout:find("  500           retry", 1, true), r.stdout .. r.stderr)
    assert.is_truthy(r.stdout:find("  0 tls_verify  final", 1, true), r.stdout .. r.stderr)
  end)

  for name, maker in pairs(MAKERS) do
    it("frees the temporaries of " .. name .. " on every probe", function ()
      local dir = proc.tmpdir()
      local path = dir .. "/gc_" .. name .. ".lua"
      proc.writefile(path, table.concat({
        "max_attempts = 3", "attempt_timeout = 5", "local MiB = 1024 * 1024",
        'local keep = string.rep("k", 3 * MiB - MiB)', 'local half = string.rep("h", MiB)',
        "function is_transient(status, body, info)", "  local n = 0",
        "  for i = 1, 12 do n = n + #(" .. maker .. ") end",
        "  return status >= 500 and n > 0 and #keep > 0", "end", "" }, "\n"))
      -- the time limit out of the way: a busy machine must not reach it;
      -- 19 probes of 24 MiB of temporaries each take 9 s of CPU under
      -- ASan, a minute and more of a machine at load 12
      local r = check({ path, "--set", "time_limit=30" }, 600)
      proc.rmtree(dir)
      assert.is_nil(r.stdout:find("memory limit", 1, true), r.stdout)
      assert.is_nil(r.stderr:find("memory limit", 1, true), r.stderr)
      assert.is_nil(r.stdout:find("policy_error", 1, true), r.stdout .. r.stderr)
      assert.is_truthy(r.stdout:find("  500           retry", 1, true), r.stdout .. r.stderr)
    end)
  end
end)

-- check ran every hook but run(): a workflow whose run() always raised (a
-- typo, htp for http) was "ok", exit 0
describe("luaretry check of a workflow's run()", function ()
  local dir
  before_each(function () dir = proc.tmpdir() end)
  after_each(function () proc.rmtree(dir) end)

  local function workflow(body)
    local path = dir .. "/w.lua"
    proc.writefile(path, "max_attempts = 3\ndeadline = 10\nattempt_timeout = 5\n" ..
                   "function run(http, args)\n" .. body .. "\nend\n")
    return path, path:gsub("%p", "%%%0")
  end

  it("runs it once: a raise is an error with file and line, an undefined global a warning", function ()
    local path, p = workflow("  local r = htp.get(args[1])\n  return r.status, r.body")
    local r = check({ path })
    assert.are.equal(3, r.code, r.stdout .. r.stderr)
    assert.matches(p .. ": loads, 2 problems\n", r.stdout)
    assert.matches("\n  warning: " .. p .. ":5: htp: read of an undefined global inside a hook", r.stdout)
    assert.matches("\n  error: run: " .. p .. ":5: attempt to index a nil value %(global 'htp'%)\n",
                   r.stdout)
  end)

  it("sends nothing: each request answered 200 '{}', args three URLs; a wrong return is an error", function ()
    -- what run() saw, returned as its body: a body that is not a string is
    -- refused, so a mismatch shows as an error naming the line
    local path = workflow(table.concat({
      "  local a = http.get(args[1])",
      "  local b = http.post(args[2] .. ':x', '{}', { ['Content-Type'] = 'application/json' })",
      "  local c = http.request { method = 'PUT', url = args[3], body = a.body }",
      "  local seen = table.concat({ #args, a.status, a.body, b.status, c.status, tostring(a.error) }, ' ')",
      "  assert(seen == '3 200 {} 200 200 nil', seen)",
      "  assert(args[1] == 'http://check.invalid/ARG1' and args[3] == 'http://check.invalid/ARG3')",
      "  assert(type(json.decode(a.body)) == 'table')",
      "  return 200, 'ok'" }, "\n"))
    local r = check({ path })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.matches(": ok\n", r.stdout)
    path = workflow("  return '200', 42")
    r = check({ path })
    assert.are.equal(3, r.code, r.stdout)
    assert.matches("error: run: .*run must return status, body", r.stdout)
  end)

  it("stops a run() that keeps asking, without calling it a problem", function ()
    local path = workflow("  while true do http.get(args[1]) end")
    local r = check({ path })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.matches(": ok\n", r.stdout)
  end)

  it("passes the shipped workflow example", function ()
    local r = check({ root .. "/policies/examples/iam-set-policy.lua" })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
  end)
end)

-- a --set's warning named the field only ("warning: hedge.max: 10 is
-- moot..."), where its errors say "--set hedge.max: ..."
describe("luaretry check --set", function ()
  it("says --set before a warning about the override, as before its errors", function ()
    local r = check({ HTTP, "--set", "hedge.delay=0.1", "--set", "hedge.max=10" })
    assert.are.equal(3, r.code, r.stdout .. r.stderr)
    assert.matches("\n  warning: %-%-set hedge%.max: 10 is moot beside max_attempts %(10%)", r.stdout)
  end)

  it("and so do simulate and run", function ()
    local sets = { "--set", "hedge.delay=0.1", "--set", "hedge.max=10", "--set", "max_attempts=1" }
    for _, args in ipairs{
      proc.concat({ "simulate", HTTP, "--attempts", "1" }, sets),
      proc.concat({ "run", HTTP, "http://127.0.0.1:1/" }, sets),
    } do
      local r = proc.run(args)
      assert.matches("luaretry: warning: %-%-set hedge%.max: 10 is moot beside max_attempts %(1%)", r.stderr)
    end
  end)
end)

-- luaretry-policy(5): "The fleet keeps an open_seconds of at most 9e9";
-- check said the other clamps (hedge.max, a multiplier below 1) and not
-- this one, so a fleet's breaker of 1e20 s read as checked and whole
describe("luaretry check, a fleet's breaker", function ()
  local tmp
  before_each(function () tmp = proc.tmpdir() end)
  after_each(function () proc.rmtree(tmp) end)

  -- a policy file of its own for each value (one name: the fleet's key)
  local function policy(open_seconds)
    local path = tmp .. "/shared_" .. open_seconds .. ".lua"
    proc.writefile(path, ("max_attempts = 3\ndeadline = 60\nbreaker = { failures = 5, open_seconds = %s }\n")
                   :format(open_seconds))
    return path
  end

  it("an open_seconds above 9e9 s is said clamped to 9e9 s when the fleet keeps it (--set fleet.local)", function ()
    local path = policy("1e20")
    local store = { "--set", "fleet.local=" .. tmp }
    local r = check(proc.concat({ path }, store))
    assert.are.equal(3, r.code, r.stdout .. r.stderr)
    assert.matches("\n  warning: " .. path:gsub("%p", "%%%0") .. ": breaker%.open_seconds: 1e%+20 s is above what " ..
                   "the fleet keeps %(fleet%.local%); clamped to 9e9 s %(about 285 years", r.stdout)
    -- set by --set: named as the override
    r = check(proc.concat({ policy("30") }, store, { "--set", "breaker.open_seconds=1e10" }))
    assert.are.equal(3, r.code, r.stdout .. r.stderr)
    assert.matches("\n  warning: %-%-set breaker%.open_seconds: 1e%+10 s is above what the fleet keeps", r.stdout)
    -- 9e9 itself is kept as it is; a breaker of this process alone keeps any
    for _, args in ipairs { proc.concat({ policy("9e9") }, store), { policy("1e20") } } do
      r = check(args)
      assert.are.equal(0, r.code, r.stdout .. r.stderr)
      assert.not_matches("open_seconds", r.stdout:match("^[^\n]*\n[^\n]*"))
    end
  end)

  -- the library says it, so every host shows it: run, and the module
  it("run says the clamp too, and the module lists it among the policy's warnings", function ()
    local path = policy("1e20")
    local r = proc.run { "run", path, "--set", "fleet.local=" .. tmp, "--set", "max_attempts=1",
                         "http://127.0.0.1:1/" }
    assert.matches("luaretry: warning: " .. path:gsub("%p", "%%%0") .. ": breaker%.open_seconds: 1e%+20 s " ..
                   "is above what the fleet keeps %(fleet%.local%)", r.stderr)
    r = proc.run { "run", policy("30"), "--set", "fleet.local=" .. tmp, "--set", "breaker.open_seconds=1e10",
                   "--set", "max_attempts=1", "http://127.0.0.1:1/" }
    assert.matches("luaretry: warning: %-%-set breaker%.open_seconds: 1e%+10 s is above", r.stderr)
    local luaretry = require "luaretry"
    local p = assert(luaretry.load(path, { set = { ["fleet.local"] = tmp } }))
    local said = table.concat(p:warnings(), "\n")
    assert.matches("breaker%.open_seconds: 1e%+20 s is above what the fleet keeps", said)
  end)
end)
