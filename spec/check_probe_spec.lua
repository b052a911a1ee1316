-- `luaretry check`: --probe outcomes with headers, a method and a body; every
-- hook run at least once (a hook that raises is an error with its file and
-- line); reads of undefined globals in hooks; warnings in line order.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
package.path = here .. "/?.lua;" .. package.path
local proc = require "support.proc"

local HTTP = proc.root .. "/policies/http.lua"

local function check(args) return proc.run({ "check", table.unpack(args) }, { timeout = 60 }) end

-- The row of the probe `label`: verdict, wait, rule.
local function row(out, label)
  for _, line in ipairs(proc.lines(out)) do
    if line:sub(1, #label + 2) == "  " .. label then
      local rest = line:sub(#label + 3)
      local verdict, wait, rule = rest:match("^%s+(%S+)%s+(.-)%s%s+(%S+)$")
      if verdict then return { verdict = verdict, wait = wait, rule = rule } end
    end
  end
  error("no probe row " .. label .. " in:\n" .. out)
end

describe("luaretry check --probe", function()
  it("judges a workflow policy's probes as its workflow's answers (info.workflow), as run does", function ()
    local probe = '409 body={"error":{"status":"ABORTED"}}'
    local wf = proc.run({ "check", proc.root .. "/policies/examples/iam-set-policy.lua", "--probe", probe },
                        { timeout = 30 })
    assert.matches("\n  409 body=[^\n]* retry ", wf.stdout)
    -- the same probe of the policy alone, with no run(): final
    local alone = proc.run({ "check", proc.root .. "/policies/iam.lua", "--probe", probe }, { timeout = 30 })
    assert.matches("\n  409 body=[^\n]* final ", alone.stdout)
  end)

  it("adds outcomes with headers, a method and a body to the probe table", function()
    local r = check({ HTTP, "--probe", '429 [RateLimit: "default";r=0;t=30]',
                      "--probe", "403 [X-RateLimit-Remaining: 0] [X-RateLimit-Reset: 20]",
                      "--probe", "403", "--probe", "POST 503", "--probe", "POST 503 [Idempotency-Key: k1]",
                      "--probe", '429 [RateLimit: "d";r=0;t=900]' })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local rl = row(r.stdout, '429 [RateLimit: "default";r=0;t=30]')
    assert.are.equal("retry", rl.verdict)
    assert.matches("^server 30%.%d+ s$", rl.wait)
    assert.matches("policies/http%.lua:%d+$", rl.rule)
    assert.are.equal("retry", row(r.stdout, "403 [X-RateLimit-Remaining: 0] [X-RateLimit-Reset: 20]").verdict)
    assert.are.equal("final", row(r.stdout, "403").verdict)
    local post = row(r.stdout, "POST 503")
    assert.are.same({ "final", "idempotency" }, { post.verdict, post.rule })
    assert.are.equal("retry", row(r.stdout, "POST 503 [Idempotency-Key: k1]").verdict)
    local far = row(r.stdout, '429 [RateLimit: "d";r=0;t=900]')
    assert.are.same({ "server_wait_too_long", "max_retry_after" }, { far.verdict, far.rule })
  end)

  it("each probe starts at time zero of a virtual clock: a wait that ends 10 ns before the deadline's last millisecond still fits", function()
    local dir = proc.tmpdir()
    finally(function() proc.rmtree(dir) end)
    -- on a real clock the microseconds between the call's start and its
    -- report leave less than the wait: the verdict would be deadline
    local function verdict(wait)
      local policy = dir .. "/tight.lua"
      proc.writefile(policy, 'name = "tight"\nmax_attempts = 3\ndeadline = 1\n' ..
                     ('backoff = { initial = %s, max = %s, jitter = "none" }\n'):format(wait, wait))
      local r = check({ policy, "--probe", "503" })
      assert.are.equal(0, r.code, r.stdout .. r.stderr)
      return row(r.stdout, "503").verdict
    end
    assert.are.equal("retry", verdict("0.99899999"))
    -- no attempt starts in the deadline's last millisecond
    assert.are.equal("deadline", verdict("0.9995"))
  end)

  it("an empty or blank Idempotency-Key is no key: a POST with one is final, as without", function()
    local r = check({ HTTP, "--probe", "POST 503 [Idempotency-Key: ]", "--probe", "PATCH 503 [idempotency-key:   ]",
                      "--probe", "POST 503 [Idempotency-Key: k]" })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.are.same({ "final", "idempotency" },
                    { row(r.stdout, "POST 503 [Idempotency-Key: ]").verdict, row(r.stdout, "POST 503 [Idempotency-Key: ]").rule })
    assert.are.equal("final", row(r.stdout, "PATCH 503 [idempotency-key:   ]").verdict)
    assert.are.equal("retry", row(r.stdout, "POST 503 [Idempotency-Key: k]").verdict)
  end)

  it("takes a body, and a transport failure after status 0", function()
    local dir = proc.tmpdir()
    finally(function() proc.rmtree(dir) end)
    proc.writefile(dir .. "/p.lua", [[
max_attempts = 3
deadline = 10
function is_transient(status, body, info)
  if status == 0 then return info.error == "reset" end
  local ms = body:match('"retry_in_ms":%s*(%d+)')
  if ms then return { wait = tonumber(ms) / 1000, jitter = true } end
  return false
end
]])
    local r = check({ dir .. "/p.lua", "--probe", '503 body={"retry_in_ms": 1500}', "--probe", "0 reset" })
    assert.are.equal(0, r.code, r.stdout)
    local b = row(r.stdout, '503 body={"retry_in_ms": 1500}')
    assert.are.equal("retry", b.verdict)
    assert.matches("^after [12]%.%d+ s$", b.wait)  -- 1.5 s, spread by up to 1 s
    assert.are.equal("retry", row(r.stdout, "0 reset").verdict)
  end)

  it("a probe that does not parse is a usage error naming it", function()
    for _, bad in ipairs { "42x", "", "0", "503 [Retry-After 5]", "503 [Retry-After: 5",
                           "503 trailing", "post 503", "1000" } do
      local r = check({ HTTP, "--probe", bad })
      assert.are.equal(2, r.code, bad)
      assert.truthy(r.stderr:find("--probe '" .. bad .. "'", 1, true), r.stderr)
    end
    assert.are.equal(2, check({ HTTP, "--probe" }).code)
  end)

  -- a misspelt failure would be judged as no real attempt ever is (a
  -- tls_verify that does not verify is final; "tls_verfy" was retried)
  it("a transport failure must be one an attempt can end in; the error lists them", function()
    for _, bad in ipairs { "0 tls_verfy", "0 tls-verify", "0 nosuch_error", "0 connect[Retry-After: 1]" } do
      local r = check({ HTTP, "--probe", bad })
      assert.are.equal(2, r.code, bad)
      assert.matches("status 0 needs a transport failure (not '", r.stderr, 1, true)
      assert.matches("tls_verify, protocol, too_many_redirects", r.stderr, 1, true)
    end
    for _, good in ipairs { "connect", "timeout", "dns", "reset", "truncated", "tls", "tls_verify",
                            "protocol", "too_many_redirects", "too_large", "transport", "range",
                            "stalled", "checksum_mismatch", "digest_mismatch" } do
      local r = check({ HTTP, "--probe", "0 " .. good })
      assert.are.equal(0, r.code, good .. ": " .. r.stderr)
    end
    assert.are.equal("final", row(check({ HTTP, "--probe", "0 tls_verify" }).stdout, "0 tls_verify").verdict)
  end)
end)

-- A command's outcome: `exit STATUS|timeout [body=TEXT]`.  Every probe was
-- an HTTP outcome: `check command --probe 1` said "1 final" (the
-- workflow's branch) while `run -- false` retries exit 1, and a bad option
-- of the command branch waited for the first command.
describe("luaretry check and simulate with a command's outcomes", function()
  it("a command's policy is probed with exit statuses, judged as run judges them", function()
    local r = check({ "command" })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local want = { ["exit 0"] = "success", ["exit 1"] = "retry", ["exit 2"] = "retry", ["exit 75"] = "retry",
                   ["exit 126"] = "final", ["exit 127"] = "final", ["exit 130"] = "final",
                   ["exit 137"] = "retry", ["exit 143"] = "final", ["exit timeout"] = "retry" }
    for label, verdict in pairs(want) do assert.are.equal(verdict, row(r.stdout, label).verdict, label) end
    assert.is_nil(r.stdout:find("\n  503 ", 1, true), "no HTTP probe for a command's policy")
    -- one built on it is a command's policy too; an HTTP policy keeps its own
    local dir = proc.tmpdir()
    finally(function() proc.rmtree(dir) end)
    proc.writefile(dir .. "/mine.lua", 'local command = require "command"\nmax_attempts = 2\n' ..
                   "function is_transient(s, b, i) return command.is_transient(s, b, i) end\n")
    r = check({ dir .. "/mine.lua" })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.are.equal("retry", row(r.stdout, "exit 1").verdict)
    r = check({ HTTP })
    assert.are.equal("retry", row(r.stdout, "503").verdict)
    assert.is_nil(r.stdout:find("\n  exit ", 1, true))
  end)

  it("--probe 'exit STATUS [body=TEXT]' and 'exit timeout' are a command's outcomes, for any policy", function()
    local r = check({ "command", "--set", "options.retry_exit_codes=75", "--set", "options.final_if_output=denied",
                      "--probe", "exit 75", "--probe", "exit 1", "--probe", "exit 75 body=access denied",
                      "--probe", "exit timeout" })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.are.equal("retry", row(r.stdout, "exit 75").verdict)
    assert.are.equal("final", row(r.stdout, "exit 1").verdict)
    assert.are.equal("final", row(r.stdout, "exit 75 body=access denied").verdict)
    assert.are.equal("retry", row(r.stdout, "exit timeout").verdict)
    -- under the HTTP policy, as `run http -- COMMAND` judges it
    r = check({ HTTP, "--probe", "exit 1" })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.matches("policies/http%.lua:%d+$", row(r.stdout, "exit 1").rule)
  end)

  it("a bad option of a command's policy is found by check, whatever the output", function()
    for _, case in ipairs {
      { "options.final_exit_codes=abc", 'options.final_exit_codes: "abc" is not an exit status' },
      { "options.final_if_output=a[", 'options.final_if_output: "a[" does not compile: malformed pattern' },
      { "options.retry_if_output=a%0", 'options.retry_if_output: "a%0" does not compile: invalid capture index %0' },
    } do
      local r = check({ "command", "--set", case[1] })
      assert.are.equal(3, r.code, r.stdout .. r.stderr)
      assert.matches(": loads, %d+ problems\n", r.stdout)
      assert.matches("\n  error: probe exit 1: is_transient: [^\n]*policies/command%.lua:%d+: options%.", r.stdout)
      assert.truthy(r.stdout:find(case[2], 1, true), r.stdout)
    end
  end)

  it("a bare status below 100 or a bad exit is a usage error that says how a command's is written", function()
    for bad, why in pairs {
      ["1"] = "1 is no HTTP status (100 to 999, or 0 with a transport failure); a command's exit status is 'exit 1'",
      ["75"] = "a command's exit status is 'exit 75'",
      ["exit 256"] = "exit needs a status from 0 to 255, or timeout",
      ["exit"] = "exit needs a status from 0 to 255, or timeout",
      ["exit 1 [Retry-After: 5]"] = "a command's outcome has no headers",
      ["exit 1 reset"] = "unexpected text after the exit status",
    } do
      for _, cmd in ipairs { "check", "simulate" } do
        local r = proc.run({ cmd, "command", "--probe", bad }, { timeout = 30 })
        assert.are.equal(2, r.code, cmd .. " " .. bad)
        assert.truthy(r.stderr:find("^luaretry: " .. cmd .. ": %-%-probe '" .. bad:gsub("%p", "%%%0") .. "': "), r.stderr)
        assert.truthy(r.stderr:find(why, 1, true), r.stderr)
      end
    end
  end)

  it("simulate --probe meets a command's outcomes in order, the last one repeating", function()
    local r = proc.run({ "simulate", "command", "--set", "options.retry_exit_codes=75",
                         "--probe", "exit 75", "--probe", "exit timeout", "--probe", "exit 3" }, { timeout = 30 })
    assert.are.equal(0, r.code, r.stderr)
    local lines = proc.lines(r.stdout)
    assert.matches("^attempt 1: retry in ", lines[1])
    assert.matches("^attempt 2: retry in ", lines[2])
    assert.matches("^attempt 3: final at ", lines[3])
    assert.are.equal(3, #lines, r.stdout)
  end)
end)

describe("luaretry check runs every hook", function()
  local dir
  before_each(function() dir = proc.tmpdir() end)
  after_each(function() proc.rmtree(dir) end)

  local BASE = "max_attempts = 3\ndeadline = 10\nattempt_timeout = 5\n"

  for hook, src in pairs {
    on_breaker = "function on_breaker(state)\n  error('breaker hook broke')\nend\n",
    on_retry = "function on_retry(info)\n  error('retry hook broke')\nend\n",
    prepare = "function prepare(request, attempt)\n  error('prepare hook broke')\nend\n",
    is_idempotent = "function is_idempotent(request)\n  error('idempotent hook broke')\nend\n",
    backoff = "function backoff(n, previous)\n  error('backoff hook broke')\nend\n",
  } do
    it("reports " .. hook .. " when it raises, with file and line; exit 3", function()
      local path = dir .. "/" .. hook .. ".lua"
      proc.writefile(path, BASE .. src)
      local r = check({ path })
      assert.are.equal(3, r.code, r.stdout)
      assert.matches("loads, %d+ problems?", r.stdout)
      assert.truthy(r.stdout:find("error: ", 1, true), r.stdout)
      assert.truthy(r.stdout:find(hook .. ".lua:5: ", 1, true), r.stdout)
    end)
  end

  it("runs on_retry and a backoff function even when no probe retries", function()
    for hook, src in pairs {
      on_retry = "function on_retry(info)\n  error('unreached')\nend\n",
      backoff = "function backoff(n, previous)\n  error('unreached')\nend\n",
    } do
      local path = dir .. "/never_" .. hook .. ".lua"
      proc.writefile(path, BASE .. "function is_transient() return false end\n" .. src)
      local r = check({ path })
      assert.are.equal(3, r.code, r.stdout)
      assert.truthy(r.stdout:find("error: a forced retry: ", 1, true), r.stdout)
      assert.truthy(r.stdout:find("never_" .. hook .. ".lua:6: unreached", 1, true), r.stdout)
    end
  end)

  it("passes a policy whose hooks all run cleanly", function()
    proc.writefile(dir .. "/ok.lua", BASE .. [[
function on_breaker(state) end
function on_retry(info) end
function prepare(request, attempt) return request end
function is_idempotent(request) return true end
function backoff(n, previous) return 0.5 end
]])
    local r = check({ dir .. "/ok.lua" })
    assert.are.equal(0, r.code, r.stdout)
  end)
end)

describe("luaretry check warns of undefined globals in hooks", function()
  local dir
  before_each(function() dir = proc.tmpdir() end)
  after_each(function() proc.rmtree(dir) end)

  it("names the file, line and name of a typo", function()
    local path = dir .. "/typo.lua"
    proc.writefile(path, [[
max_attempts = 3
deadline = 10
attempt_timeout = 5
local limit = 429
function is_transient(status, body, info)
  if statuss == limit then return true end
  return status >= 500 or DEBUG_MODE == true
end
]])
    local r = check({ path })
    assert.are.equal(3, r.code, r.stdout)
    local a = r.stdout:find(path .. ":6: statuss: read of an undefined global", 1, true)
    local b = r.stdout:find(path .. ":7: DEBUG_MODE: read of an undefined global", 1, true)
    assert.truthy(a and b, r.stdout)
    assert.is_true(a < b, "in line order")
  end)

  it("says nothing of globals the script sets, nor of the shipped policies", function()
    for _, name in ipairs { "http", "gcs", "iam", "memorystore", "azure", "azure-interactive", "azure-batch" } do
      local r = check({ proc.root .. "/policies/" .. name .. ".lua" })
      assert.are.equal(0, r.code, r.stdout)
      assert.is_nil(r.stdout:find("undefined global", 1, true), r.stdout)
    end
  end)
end)

describe("luaretry check's warnings", function()
  it("come in line order, the same on every run", function()
    local first
    for _ = 1, 6 do
      local r = check({ here .. "/fixtures/k_many_unknown.lua" })
      local lines = {}
      for n in r.stdout:gmatch("warning: [^\n]-:(%d+): ") do lines[#lines + 1] = tonumber(n) end
      assert.are.same({ 4, 5, 6, 7, 8, 9, 10 }, lines, r.stdout)
      first = first or r.stdout
      assert.are.equal(first, r.stdout)
    end
  end)
end)

describe("the warnings run and simulate print", function()
  it("come in line order too", function()
    local r = proc.run({ "simulate", here .. "/fixtures/k_many_unknown.lua", "--attempts", "1" },
                       { timeout = 30 })
    local lines = {}
    for n in r.stderr:gmatch("warning: [^\n]-:(%d+): ") do lines[#lines + 1] = tonumber(n) end
    assert.are.same({ 4, 5, 6, 7, 8, 9, 10 }, lines, r.stderr)
  end)
end)

describe("luaretry simulate --probe", function()
  local function simulate(args) return proc.run({ "simulate", table.unpack(args) }, { timeout = 60 }) end

  it("meets the outcomes in order, the last repeating, judged as run judges them", function()
    local r = simulate({ HTTP, "--probe", '429 [RateLimit: "q";r=0;t=5]', "--probe",
                         "POST 503 [Idempotency-Key: k1]", "--probe", "200" })
    assert.are.equal(0, r.code, r.stderr)
    local lines = proc.lines(r.stdout)
    assert.matches("^attempt 1: retry in 5%.%d+ s %(server%)", lines[1])
    assert.matches("^attempt 2: retry in %d%.%d+ s %(backoff%)", lines[2])
    assert.matches("^attempt 3: success at ", lines[3])
    assert.are.equal(3, #lines)
    local post = simulate({ HTTP, "--probe", "POST 503" })
    assert.matches("^attempt 1: final at 0%.000 s %(idempotency%)", post.stdout)
    local last = simulate({ HTTP, "--probe", "503", "--attempts", "4" })
    assert.matches("attempt 4: exhausted", last.stdout)
  end)

  it("a probe that does not parse is a usage error, and --clients takes none", function()
    local r = simulate({ HTTP, "--probe", "503 [X: y" })
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find("--probe '503 [X: y'", 1, true), r.stderr)
    assert.are.equal(2, simulate({ HTTP, "--probe", "503", "--clients", "3" }).code)
  end)
end)
