-- Workflows: run(http, args) retried as a whole, end to end through the
-- CLI, real libcurl and the fault server on 127.0.0.1.
local proc = require "support.proc"
local q = proc.q

local HERE = proc.root .. "/spec/fixtures/workflow/"
local IAM_EXAMPLE = proc.root .. "/policies/examples/iam-set-policy.lua"

local function run(args) return proc.run(args, { timeout = 30 }) end

describe("workflows", function ()
  local srv

  before_each(function ()
    srv = proc.server(HERE .. "iam_server.lua")
  end)
  after_each(function ()
    if srv then srv:stop() end
    srv = nil
  end)

  local function iam_policy()
    local body = proc.readfile_cmd("env -u LD_PRELOAD curl -sS --max-time 5 -X POST -d '{}' " ..
                                   q(srv.base .. "/v1/projects/p:getIamPolicy"))
    return proc.json.decode(body)
  end

  local function members(policy, role)
    for _, b in ipairs(policy.bindings) do
      if b.role == role then return table.concat(b.members, ",") end
    end
  end

  -- A workflow policy of the case's own, in a folder removed after it:
  -- `head` (default: one attempt of 10 s within 20 s), then `rest`.
  local function workflow(name, rest, head)
    local dir = proc.tmpdir()
    finally(function () proc.rmtree(dir) end)
    local path = dir .. "/" .. name
    proc.writefile(path, (head or "max_attempts = 1\ndeadline = 20\nattempt_timeout = 10\n") .. rest)
    return path
  end

  it("http.* refuses a NUL byte in a URL, a method or a header, and a method that is no token, as prepare() does", function ()
    local url = srv.base .. "/v1/projects/p:getIamPolicy"
    local cases = {
      { ("http.get(%q .. '\\0x')"):format(url), "the URL holds a NUL byte" },
      { ("http.get(%q, { ['X-Tok'] = 'abc\\0def' })"):format(url), "a header value holds a NUL byte" },
      { ("http.request{ method = 'POST\\0x', url = %q }"):format(url), "the method holds a NUL byte" },
      { ("http.request{ method = 'GE T', url = %q }"):format(url), 'the method "GE T" is not a method' },
    }
    for i, case in ipairs(cases) do
      local wf = workflow("nul" .. i .. ".lua",
                          "function run(http, args) local r = " .. case[1] .. " return 200, 'sent\\n' end\n")
      local r = run({ "run", wf })
      assert.are.equal(3, r.code, r.stderr)
      assert.matches("nul" .. i .. "%.lua:4: http: " .. case[2]:gsub("%p", "%%%0"), r.stderr)
      assert.are.equal("", r.stdout)
    end
  end)

  it("a workflow's requests carry the policy's attempt_header and propagate headers, as every attempt does", function ()
    local wf = workflow("prop.lua", "attempt_header = 'X-Attempt'\npropagate = {}\n" ..
                          "function run(http, args) local r = http.post(args[1], '{}') return r.status, 'done\\n' end\n",
                        "max_attempts = 2\ndeadline = 20\nattempt_timeout = 10\n")
    local url = srv.base .. "/v1/projects/p:getIamPolicy"
    local r = run({ "run", wf, url })
    assert.are.equal(0, r.code, r.stderr)
    local seen = srv:requests_on("/v1/projects/p:getIamPolicy")
    local h = seen[#seen].headers
    assert.are.equal("1", h["x-attempt"])
    -- the workflow may retry its rounds: the next service must not retry
    assert.are.equal("0", h["luaretry-retries"])
    local ms = tonumber(h["luaretry-deadline-ms"])
    assert.is_true(ms ~= nil and ms > 0 and ms <= 10000, tostring(h["luaretry-deadline-ms"]))
  end)

  it("an answer's header said twice gives its first value, as info.headers does", function ()
    local wf = workflow("twice.lua", "function run(http, args) local r = http.get(args[1]) " ..
                                     "return 200, tostring(r.headers['x-dup']) .. '\\n' end\n")
    local r = run({ "run", wf, srv.base .. "/twice" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("first\n", r.stdout)
  end)

  it("run() is one call into the script: its own time between requests adds up to time_limit", function ()
    -- 40 requests, each after about 0.02 s of the script's own work:
    -- 0.8 s in all, over the 0.25 s limit however the requests are spaced
    local wf = workflow("busy.lua",
                        "function run(http, args)\n" ..
                       "  local n = 0\n" ..
                       "  for i = 1, 40 do\n" ..
                       "    local t = os.clock()\n" ..
                       "    while os.clock() - t < 0.02 do n = n + 1 end\n" ..
                       "    http.post(args[1], '{}')\n" ..
                       "  end\n" ..
                       "  return 200, 'done ' .. n .. '\\n'\n" ..
                       "end\n", "max_attempts = 1\ndeadline = 60\nattempt_timeout = 60\n")
    local r = run({ "run", wf, srv.base .. "/v1/projects/p:getIamPolicy" })
    assert.are.equal(3, r.code, r.stdout .. r.stderr)
    assert.matches("busy%.lua:%d+: .*time limit", r.stderr)
    assert.is_nil(r.stdout:find("done", 1, true))
  end)

  it("the IAM example re-runs the whole read-modify-write after 409 ABORTED; both writers' bindings survive", function ()
    local r = run({ "run", IAM_EXAMPLE, srv.base .. "/v1/projects/p", "roles/viewer",
                    "user:alice@example.com", "--set", "backoff.initial=0.05", "--seed", "1" })
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("attempt 1: 409 %-> retry", r.stderr)
    assert.matches("policies/iam.lua:%d+", r.stderr)
    assert.matches("attempt 2: 200 %-> success", r.stderr)
    -- two reads and two writes: the whole sequence ran twice
    local seen = srv:requests()
    local reads, writes = 0, 0
    for _, req in ipairs(seen) do
      if req.path:match(":getIamPolicy$") then reads = reads + 1 end
      if req.path:match(":setIamPolicy$") then writes = writes + 1 end
    end
    assert.are.equal(2, reads)
    assert.are.equal(2, writes)
    local final = iam_policy()
    assert.are.equal("user:concurrent-writer@example.com", members(final, "roles/editor"))
    assert.are.equal("user:alice@example.com", members(final, "roles/viewer"))
    -- standard output holds the final write's answer only
    assert.are.equal("user:alice@example.com", members(proc.json.decode(r.stdout), "roles/viewer"))
  end)

  it("a bare run URL with iam.lua does not retry 409 ABORTED: only the whole sequence could win", function ()
    local aborted = proc.server(HERE .. "aborted_server.lua")
    local ok, err = pcall(function ()
      local r = run({ "run", proc.root .. "/policies/iam.lua", aborted.base .. "/v1/x:setIamPolicy",
                      "-X", "PUT", "-d", "{}" })
      assert.are.equal(1, r.code, r.stderr)
      assert.matches("409 %-> final", r.stderr)
      assert.are.equal(1, #aborted:requests())
    end)
    aborted:stop()
    assert(ok, err)
  end)

  it("retries run() until it succeeds and passes it the words after the policy", function ()
    local r = run({ "run", HERE .. "count_run.lua", "a", "b", "c" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("a+b+c\n", r.stdout)
    assert.matches("attempt 3/5: 200 %-> success", r.stderr)
  end)

  it("a Lua error in run() is a policy error naming file and line", function ()
    local r = run({ "run", HERE .. "broken_run.lua" })
    assert.are.equal(3, r.code)
    assert.matches("broken_run.lua:5: no such thing", r.stderr)
  end)

  it("run() must return status and body: the error names where run() is", function ()
    local r = run({ "run", HERE .. "broken_run.lua", "--set", "options.mode=return" })
    assert.are.equal(3, r.code)
    assert.matches("broken_run%.lua:%d+: run must return status, body", r.stderr)
  end)

  it("a policy without run() needs a URL", function ()
    local r = run({ "run", proc.root .. "/policies/http.lua" })
    assert.are.equal(2, r.code)
    assert.matches("a URL, %-%- COMMAND, or a policy with run%(%) is needed", r.stderr)
  end)

  -- luaretry(1): "after --, every word is one of its arguments, as it is
  -- (one that starts with - too): a policy with run() never runs a
  -- command".  `run WF -- -x` ran -x as a command (127), and `run WF a --
  -- -x` was "a URL or a COMMAND, not both": no way to give run() a -x.
  it("-- after a workflow policy: the words after it are run()'s arguments as they are, never a command", function ()
    local wf = workflow("args.lua", "function run(http, args) return 200, '[' .. table.concat(args, '|') .. ']\\n' end\n")
    local dir = proc.tmpdir()
    finally(function () proc.rmtree(dir) end)
    local touched = dir .. "/touched"
    for _, case in ipairs {
      { { "a", "--", "-x", "--max-time", "b" }, "[a|-x|--max-time|b]\n" },
      { { "--", "-x" }, "[-x]\n" },
      { { "--", "touch", touched }, "[touch|" .. touched .. "]\n" },
      { { "a", "--", "--", "-" }, "[a|--|-]\n" },
      { { "a", "--" }, "[a]\n" },
    } do
      local r = run(proc.concat({ "run", "-s", wf }, case[1]))
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(case[2], r.stdout, table.concat(case[1], " "))
    end
    assert.is_nil(proc.readfile(touched))
    -- options before -- are luaretry's: -o takes the body
    local r = run({ "run", "-s", wf, "-o", dir .. "/out", "--", "-o", "x" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("[-o|x]\n", proc.readfile(dir .. "/out"))
    -- a policy without run(): the words after -- are a command, as ever
    for _, case in ipairs {
      { { "a", "--", "true" }, "a URL or a COMMAND, not both" },
      { { "--" }, "%-%- needs a COMMAND" },
      { { "-o", dir .. "/o", "--", "true" }, "%-X, %-H, %-d, %-o and %-f are for URLs" },
    } do
      r = run(proc.concat({ "run", proc.root .. "/policies/http.lua" }, case[1]))
      assert.are.equal(2, r.code, r.stderr)
      assert.matches("luaretry: run: " .. case[2], r.stderr)
    end
  end)

  -- A request made when the attempt's time was used up raised a Lua error:
  -- a policy error (exit 3) on the first round, never retried, where a
  -- single request's attempt at its timeout is a transient "timeout"
  it("a request after the attempt's time is used up ends the round as a timed-out attempt, retried", function ()
    local hang = proc.server(HERE .. "hang_server.lua")
    finally(function () hang:stop() end)
    for _, catch in ipairs { "false", "true" } do
      local r = run({ "run", HERE .. "late_run.lua", hang.base .. "/hang", "--set", "options.catch=" .. catch })
      assert.are.equal(4, r.code, r.stderr)
      for n = 1, 2 do
        assert.matches("attempt " .. n .. "/3: timeout error %-> retry in [%d.]+ s %(backoff; default%): " ..
                       "a request of run%(%) found the attempt's time used up", r.stderr)
      end
      assert.matches("attempt 3/3: timeout error %-> exhausted %(max_attempts%)", r.stderr)
      assert.not_matches("policy_error", r.stderr)
      assert.not_matches("is used up", r.stderr)
      assert.are.equal("", r.stdout)
    end
  end)

  it("an endless body is cut at 16 MiB: the request fails with a transport error, memory bounded", function ()
    local endless = proc.server(proc.root .. "/spec/fixtures/run/server.lua")
    finally(function () endless:stop() end)
    -- (room in the script for 16 MiB: its own limit is 8 MiB; and time: the
    -- 16 MiB body's copy into Lua must not race the 0.25 s time limit on a
    -- busy machine)
    local r = run({ "run", HERE .. "endless_run.lua", endless.base .. "/endless",
                    "--set", "memory_limit=100000000", "--set", "time_limit=10" })
    assert.are.equal(0, r.code, r.stderr)
    local kept = tonumber(r.stdout:match(
      "^status=0 error=transport detail=the response body is longer than 16777216 bytes body=(%d+)\n$"))
    assert.truthy(kept, r.stdout)
    assert.is_true(kept <= 16777216 and kept > 16000000, "kept " .. kept)
  end)
end)
