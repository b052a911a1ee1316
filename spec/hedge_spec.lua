-- Hedged requests (hedge = { delay =, max = }): another attempt of an
-- idempotent request while the first has not answered, the first
-- acceptable answer winning, through `luaretry run` against the fault
-- server (spec/fixtures/hedge/server.lua); and hedge's load errors.
local proc = require "support.proc"

local SERVER = proc.root .. "/spec/fixtures/hedge/server.lua"

local function policy(dir, text)
  local path = dir .. "/p.lua"
  proc.writefile(path, text)
  return path
end

-- `luaretry ARGS... --log-json DIR/log.json`: its result, with the log's
-- lines decoded in r.attempts and r.summary.
local function run_logged(dir, args)
  local log = dir .. "/log.json"
  local all = { table.unpack(args) }
  all[#all + 1], all[#all + 2] = "--log-json", log
  os.remove(log)
  local r = proc.run(all, {timeout = 20})
  r.attempts = {}
  for _, line in ipairs(proc.lines(proc.readfile(log) or "")) do
    local o = proc.json.decode(line)
    if o.summary then r.summary = o else r.attempts[#r.attempts + 1] = o end
  end
  return r
end

local function seen(srv, path) return #srv:requests_on(path) end

-- Every logged decision came before `secs` into its call, on the engine's
-- own clock (from the call's start: a busy machine's start-up is not in
-- it): each line's elapsed.
local function decided_before(r, secs, why)
  assert.is_true(#r.attempts > 0, "nothing logged")
  for _, a in ipairs(r.attempts) do
    assert.is_true(a.elapsed < secs, ("decided at %.3f s: %s"):format(a.elapsed, why))
  end
end

describe("hedge", function ()
  local srv, dir
  before_each(function ()
    dir = proc.tmpdir()
    srv = proc.server(SERVER)
  end)
  after_each(function ()
    srv:stop()
    proc.rmtree(dir)
  end)

  local function run(p, path, extra)
    local args = {"run", p, srv.base .. path}
    for _, a in ipairs(extra or {}) do args[#args + 1] = a end
    return run_logged(dir, args)
  end

  local HEDGED = [[
max_attempts = 5
attempt_timeout = 5
hedge = { delay = 0.1, max = 1 }
]]

  it("sends a hedge when the attempt is slow, and the hedge's answer wins alone", function ()
    local r = run(policy(dir, HEDGED), "/slow-first")
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("body2", r.stdout)
    decided_before(r, 1.5, "the slow original (2 s) was waited for")
    assert.matches("attempt 2/5 %(hedge%): 200 %-> success %(default%); 1 in flight cancelled", r.stderr)
    assert.are.equal(1, #r.attempts)
    assert.is_true(r.attempts[1].hedge)
    assert.are.equal(1, r.attempts[1].in_flight)
    assert.are.equal(1, r.summary.hedges)
    assert.are.equal(1, r.summary.hedges_won)
    assert.are.equal(1, r.summary.hedges_cancelled)
    assert.are.equal(2, r.summary.attempts)
    assert.are.equal(2, seen(srv, "/slow-first"))
  end)

  it("is turned on by --set hedge.delay, and counted by --stats=json", function ()
    local p = policy(dir, "max_attempts = 3\nattempt_timeout = 5\n")
    local r = run(p, "/slow-first", {"--set", "hedge.delay=0.05", "--stats=json"})
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("body2", r.stdout)
    local stats = proc.json.decode(r.stderr:match("(%b{})%s*$"))
    assert.are.equal(1, stats.hedges)
    assert.are.equal(1, stats.hedges_won)
    assert.are.equal(1, stats.hedges_cancelled)
  end)

  it("never hedges a request that is not idempotent (a POST)", function ()
    local r = run(policy(dir, HEDGED), "/slow-first", {"-X", "POST", "-d", "x"})
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("body1", r.stdout)
    assert.is_true(r.secs >= 1.9, r.secs .. " s") -- the original, waited for
    assert.are.equal(0, r.summary.hedges)
    assert.are.equal(1, seen(srv, "/slow-first"))
  end)

  it("judges a failed hedge by is_transient and waits for the original, which succeeds", function ()
    local r = run(policy(dir, HEDGED), "/hedge-fails")
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("original", r.stdout)
    assert.are.equal(2, #r.attempts)
    assert.are.equal("in_flight", r.attempts[1].verdict)
    assert.are.equal(503, r.attempts[1].status)
    assert.is_true(r.attempts[1].hedge)
    assert.are.equal("success", r.attempts[2].verdict)
    assert.is_false(r.attempts[2].hedge)
    assert.are.equal(1, r.summary.hedges)
    assert.are.equal(0, r.summary.hedges_won)
    assert.matches("attempt 2/5 %(hedge%): 503 %-> in_flight %(default%); 1 more in flight", r.stderr)
  end)

  it("keeps a hedge's Retry-After for the answer that decides the round: the retry never comes sooner", function ()
    -- the hedge's 429 came while the attempt was in flight; the attempt's
    -- 503 decides the round: its backoff (0.05 s) was the wait, the 2 s
    -- the server asked of the hedge thrown away
    local p = policy(dir, HEDGED .. "backoff = { initial = 0.05, jitter = 'none' }\n" ..
                          "throttle_backoff = { initial = 0.05, jitter = 'none' }\n")
    local r = run(p, "/hedge-asks")
    assert.are.equal(0, r.code, r.stderr)
    local seen = srv:requests_on("/hedge-asks")
    assert.are.equal(3, #seen)
    -- the 429 left at once: the retry is 2 s after it at least
    assert.is_true(seen[3].time - seen[2].time >= 2, ("retried %.3f s after the 429"):format(seen[3].time - seen[2].time))
    assert.are.equal("server", r.attempts[2].wait_source, proc.json.encode(r.attempts[2]))
  end)

  it("tells the script which attempt is a hedge (info.hedge)", function ()
    local p = policy(dir, HEDGED .. [[
function is_success(status, body, info) return status == 200 and not info.hedge end
function is_transient(status, body, info) return info.hedge end
]])
    local r = run(p, "/slow-first")
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("body1", r.stdout)  -- the hedge's 200 was not a success
    assert.are.equal("in_flight", r.attempts[1].verdict)
    assert.is_true(r.attempts[1].hedge)
    assert.is_false(r.attempts[2].hedge)
  end)

  it("refuses a hedge while the breaker is open", function ()
    local p = policy(dir, [[
max_attempts = 5
attempt_timeout = 5
hedge = { delay = 0.1, max = 3 }
breaker = { failures = 1, open_seconds = 30 }
]])
    local r = run(p, "/hedge-fails")
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("original", r.stdout)
    -- the first hedge's 503 opened the circuit: no second hedge went
    assert.are.equal(1, r.summary.hedges)
    assert.are.equal(2, seen(srv, "/hedge-fails"))
  end)

  it("hedges while the budget allows a retry, a hedge paying nothing as it goes (gRPC A6)", function ()
    local p = policy(dir, [[
max_attempts = 10
attempt_timeout = 5
hedge = { delay = 0.05, max = 5 }
budget = { max_tokens = 4, token_ratio = 0.1 }
]])
    -- slow but healthy: every answer is slow and none fails, so the budget
    -- stays whole and hedge.max bounds the hedges (before, each hedge paid
    -- a token as it went: 4 -> 3 -> 2, and the third was refused)
    local r = run(p, "/all-slow")
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("slow", r.stdout)
    assert.are.equal(5, r.summary.hedges)
    assert.are.equal(6, seen(srv, "/all-slow"))
  end)

  it("bounds every attempt in flight by the deadline", function ()
    -- the two hedges go 0.1 s apart, long before the deadline (2 s: with
    -- 0.5 s an ASan run on a busy machine once sent the second too late)
    local p = policy(dir, [[
max_attempts = 10
deadline = 2
hedge = { delay = 0.1, max = 2 }
]])
    local r = run(p, "/hang")
    assert.are.equal(5, r.code, r.stderr)
    decided_before(r, 2 + 1, "an attempt outlived the deadline (2 s)")
    assert.are.equal(2, r.summary.hedges)
    assert.are.equal(3, seen(srv, "/hang"))
    for _, a in ipairs(r.attempts) do assert.are.equal("timeout", a.error) end
  end)

  it("writes one winner's body whole when the attempt and its hedge answer at once", function ()
    local r = run(policy(dir, HEDGED), "/both")
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(200000, #r.stdout)
    assert.is_true(r.stdout == string.rep("A", 200000) or r.stdout == string.rep("B", 200000),
                   "the bodies were mixed")
    assert.are.equal(1, r.summary.hedges)
    assert.are.equal(1, r.summary.hedges_cancelled)
  end)

  it("keeps each attempt's own prepared request while a hedge is prepared", function ()
    local p = policy(dir, HEDGED .. [[
function prepare(request, attempt)
  request.headers["X-Attempt"] = tostring(attempt)
  request.body = "body-of-" .. attempt .. string.rep(".", 1000)
  request.url = request.url:gsub("%?.*", "") .. "?attempt=" .. attempt
end
-- the outcome's url is its own attempt's, not the hedge's prepared since
function is_success(status, body, info)
  return status == 200 and info.url:match("attempt=(%d+)$") == (info.hedge and "2" or "1")
end
function is_transient() return false end
]])
    local r = run(p, "/prepared", {"-X", "PUT", "-d", "x"})
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("PUT body-of-1" .. string.rep(".", 1000) .. " 1", r.stdout)
    assert.are.equal(1, r.summary.hedges)
    assert.are.equal(0, r.summary.hedges_won)
    local reqs = srv:requests_on("/prepared")
    assert.are.equal(2, #reqs)
    assert.are.equal(1009, reqs[1].body_len)
    assert.are.equal("2", reqs[2].headers["x-attempt"])
  end)

  it("hedges in a batch, on free transfer slots (--parallel), each URL's winner in its file", function ()
    local out = dir .. "/out"
    proc.sh("mkdir " .. proc.q(out))
    local args = {"run", policy(dir, HEDGED), "--output-dir", out, "--parallel-max", "8"}
    for n = 1, 6 do args[#args + 1] = srv.base .. "/b/" .. n end
    local r = run_logged(dir, args)
    assert.are.equal(0, r.code, r.stderr)
    decided_before(r, 1.5, "a slow original (2 s) was waited for")
    for n = 1, 6 do
      assert.are.equal(n % 2 == 1 and "fast" .. n .. "-2" or "fast" .. n .. "-1",
                       proc.readfile(out .. "/" .. n))
    end
    assert.are.equal(3, r.summary.hedges)
    assert.are.equal(3, r.summary.hedges_won)
    assert.are.equal(3, r.summary.hedges_cancelled)
  end)

  it("does not hedge with -i, -D or -w, which tell of one transfer", function ()
    for _, opt in ipairs{{"-i"}, {"-D", dir .. "/head"}, {"-w", "%{http_code}"}} do
      srv:reset()
      local r = run(policy(dir, HEDGED), "/slow-first", opt)
      assert.are.equal(0, r.code, r.stderr)
      assert.matches("body1", r.stdout)
      assert.are.equal(0, r.summary.hedges)
      assert.are.equal(1, seen(srv, "/slow-first"))
    end
  end)

  it("writes the winner to -o FILE, never the loser's bytes", function ()
    local out = dir .. "/out"
    local r = run(policy(dir, HEDGED), "/slow-first", {"-o", out})
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("body2", proc.readfile(out))
  end)
end)

describe("hedge in workflows", function ()
  -- run(http, {BASE, "get PATH" | "post PATH", ...}): the bodies joined by "|"
  local WF = proc.root .. "/spec/fixtures/hedge_workflow/"
  local srv, dir
  before_each(function ()
    dir = proc.tmpdir()
    srv = proc.server(WF .. "server.lua")
  end)
  after_each(function ()
    srv:stop()
    proc.rmtree(dir)
  end)

  local function run(steps)
    local args = {"run", WF .. "run.lua", srv.base}
    for _, s in ipairs(steps) do args[#args + 1] = s end
    return run_logged(dir, args)
  end

  it("hedges a slow idempotent request: the hedge's answer reaches the script alone", function ()
    local r = run{"get /slow-first"}
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("body2", r.stdout)
    decided_before(r, 2.5, "the slow original (3 s) was waited for")
    assert.are.equal(2, seen(srv, "/slow-first"))
    assert.matches("request 1: attempt 2/3 %(hedge%): 200 %-> success %(default%); " ..
                   "1 in flight cancelled", r.stderr)
    assert.matches("\nluaretry: attempt 1/3: 200 %-> success", "\n" .. r.stderr)
    -- the request's line, then the run's
    assert.are.equal(2, #r.attempts)
    assert.are.equal(1, r.attempts[1].request)
    assert.is_true(r.attempts[1].hedge)
    assert.are.equal(1, r.attempts[1].in_flight)
    assert.are.equal("success", r.attempts[1].verdict)
    assert.is_nil(r.attempts[2].request)
    assert.are.equal(1, r.summary.hedges)
    assert.are.equal(1, r.summary.hedges_won)
    assert.are.equal(1, r.summary.hedges_cancelled)
  end)

  it("counts the workflow as one call: a hedged request is a round of it, not a call", function ()
    local r = run{"get /slow-first", "get /slow-once", "--stats"}
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("stats: calls 1, ", r.stderr)
    assert.matches("retries 0,", r.stderr)
    assert.matches("hedges 2 %(won 2, cancelled 2%)", r.stderr)
  end)

  it("never hedges a request that is not idempotent (a POST without Idempotency-Key)", function ()
    local r = run{"post /post-slow"}
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("post1", r.stdout)
    assert.is_true(r.secs >= 0.5, r.secs .. " s")
    assert.are.equal(1, seen(srv, "/post-slow"))
    assert.are.equal(0, r.summary.hedges)
    assert.not_matches("request 1:", r.stderr)
  end)

  it("leaves no connection open behind the cancelled attempt", function ()
    local r = run{"get /slow-once", "post /pause", "get /_faults/connections"}
    assert.are.equal(0, r.code, r.stderr)
    local first, pause, counts = r.stdout:match("^([^|]*)|([^|]*)|(.*)$")
    assert.are.equal("once2", first)
    assert.are.equal("paused", pause)
    -- the winner's connection, kept and asked on; the cut original's closed
    assert.are.equal(1, proc.json.decode(counts).open, counts)
    assert.are.equal(1, r.summary.hedges_cancelled)
  end)

  it("gives the script the original's answer when its hedge failed", function ()
    local r = run{"get /hedge-fails"}
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("original", r.stdout)
    assert.are.equal(2, seen(srv, "/hedge-fails"))
    -- the request's two decisions, then the run's
    assert.are.equal(3, #r.attempts)
    assert.are.equal("in_flight", r.attempts[1].verdict)
    assert.are.equal(503, r.attempts[1].status)
    assert.are.equal("success", r.attempts[2].verdict)
    assert.is_false(r.attempts[2].hedge)
    assert.are.equal(1, r.attempts[2].request)
    assert.are.equal(1, r.summary.hedges)
    assert.are.equal(0, r.summary.hedges_won)
  end)

  it("stops at once on Ctrl-C while a request and its hedge are in flight", function ()
    local job = proc.spawn({"run", WF .. "run.lua", srv.base, "get /hang"}, dir)
    finally(function () job:stop() end)
    -- both sent: the attempt (it hangs, attempt_timeout 10 s) and its hedge
    assert.truthy(proc.wait_for(function () return seen(srv, "/hang") == 2 or nil end, 10))
    job:signal("INT")
    local code = job:wait(5)
    assert.are.equal(130, code, job:stderr())
    assert.matches("request 1: attempt %d/3: transport error %-> cancelled", job:stderr())
    assert.matches("interrupted", job:stderr())
  end)
end)

describe("hedge's load errors", function ()
  local dir
  before_each(function () dir = proc.tmpdir() end)
  after_each(function () proc.rmtree(dir) end)

  local function check(hedge, timeout)
    local path = dir .. "/bad.lua"
    proc.writefile(path, "max_attempts = 3\nattempt_timeout = " .. (timeout or 2) ..
                   "\n\nhedge = " .. hedge .. "\n")
    return proc.run({"check", path}), path
  end

  -- `check PATH --set hedge.delay=DELAY`
  local function recheck(path, delay)
    return proc.run({"check", path, "--set", "hedge.delay=" .. delay})
  end

  for _, case in ipairs{
    {"{ delay = 0 }", 'hedge%.delay: expected a number of seconds above 0, or a percentile "pNN"'},
    {"{ delay = -1 }", "hedge%.delay: expected a number of seconds above 0.*got %-1"},
    {"{ delay = 0/0 }", "hedge%.delay: expected a number of seconds above 0.*nan"},
    {"{ delay = 2 }", "hedge%.delay: 2 s is not below attempt_timeout %(2 s%): no hedge could ever go"},
    {"{ delay = 'p100' }", 'hedge%.delay: expected .*got "p100"'},
    {"{ delay = 0.1, max = 0 }", "hedge%.max: expected a whole number from 1 to 10, got 0"},
    {"{ delay = 0.1, max = 11 }", "hedge%.max: expected a whole number from 1 to 10, got 11"},
    -- the value as written, not rounded by %g (1e+06)
    {"{ delay = 0.1, max = 1000001 }", "hedge%.max: expected a whole number from 1 to 10, got 1000001"},
    {"{ delay = 0.1, max = 2.25 }", "hedge%.max: expected a whole number from 1 to 10, got 2%.25"},
    {"{ max = 2 }", "hedge: hedge%.delay must be set"},
    {"true", "hedge: expected a table {delay =, max =}"},
  } do
    it("refuses hedge = " .. case[1] .. " with the file and line", function ()
      local r, path = check(case[1])
      assert.are.equal(3, r.code, r.stdout .. r.stderr)
      local text = r.stdout .. r.stderr
      assert.matches(path:gsub("%p", "%%%0") .. ":4: " .. case[2], text)
    end)
  end

  it("check warns about a hedge on a policy under which no request is idempotent", function ()
    local path = dir .. "/never.lua"
    proc.writefile(path, "max_attempts = 3\nattempt_timeout = 2\nhedge = { delay = 0.1 }\n" ..
                   "function is_idempotent(request) return false end\n")
    local r = proc.run({"check", path})
    assert.matches("loads, 1 problem", r.stdout)
    assert.matches("warning: hedge: no request %(GET, HEAD, OPTIONS, PUT, DELETE, POST, PATCH%) " ..
                   "is idempotent under the policy's is_idempotent: no hedge would ever go", r.stdout)
    -- the method rule makes GET idempotent: no warning
    r = proc.run({"check", proc.root .. "/policies/http.lua", "--set", "hedge.delay=0.1"})
    assert.are.equal(0, r.code, r.stdout)
    assert.not_matches("hedge:", r.stdout)
  end)

  it("takes seconds below attempt_timeout and percentiles, from the script or --set", function ()
    local r, path = check("{ delay = 'p95', max = 2, ceiling = 0.5 }")
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    for _, v in ipairs{"p99.9", "0.25", "1.5"} do
      r = recheck(path, v)
      assert.are.equal(0, r.code, v .. ": " .. r.stdout .. r.stderr)
    end
    r = recheck(path, "2")
    assert.are.equal(3, r.code)
    assert.matches("hedge%.delay: 2 s is not below attempt_timeout", r.stdout .. r.stderr)
  end)
end)

describe("hedge in the Lua module", function ()
  it("p:run makes one attempt at a time: never a hedge", function ()
    local lr = require "luaretry"
    local p = assert(lr.load_string("max_attempts = 3\nattempt_timeout = 5\n" ..
                                    "hedge = { delay = 0.01, max = 2 }\n", "=hedged"))
    local calls = 0
    local final = p:run(function (attempt, timeout)
      calls = calls + 1
      return 200, "ok"
    end, { virtual = true, seed = 1 })
    assert.are.equal("success", final.verdict)
    assert.are.equal(1, calls)
    assert.are.equal(0, p:metrics().hedges)
  end)
end)

describe("simulate --latency", function ()
  -- `simulate http` with a hedge after 50 ms, 10 ms latency and 1 s for 5%
  local function simulate(...)
    return proc.run({"simulate", "http", "--set", "hedge.delay=0.05", "--latency", "0.01,1@0.05", ...})
  end

  it("shows the tail with the hedge and without, on the virtual clock, the same every run", function ()
    local r = simulate("--json")
    assert.are.equal(0, r.code, r.stderr)
    local lines = proc.lines(r.stdout)
    assert.are.equal(2, #lines)
    local with, without = proc.json.decode(lines[1]), proc.json.decode(lines[2])
    assert.is_true(with.hedge)
    assert.are.equal(1000, with.calls)
    assert.is_true(with.p99 <= 0.1, with.p99)
    assert.is_true(with.requests_per_call <= 1.08, with.requests_per_call)
    assert.is_true(with.hedges > 0 and with.hedges_won > 0)
    assert.is_false(without.hedge)
    assert.are.equal(1, without.p99)
    assert.are.equal(1, without.requests_per_call)
    assert.are.equal(0, without.hedges)
    assert.are.equal(r.stdout, simulate("--json").stdout)
    r = simulate()
    assert.matches("with hedge:   p50 0%.010 s  p99 0%.0%d0 s", r.stdout)
    assert.matches("without:      p50 0%.010 s  p99 1%.000 s", r.stdout)
  end)

  it("runs its calls on one timeline for the guards, each first attempt waiting for its rate token", function ()
    local dir = proc.tmpdir()
    finally(function () proc.rmtree(dir) end)
    local path = dir .. "/p.lua"
    proc.writefile(path, "max_attempts = 3\nattempt_timeout = 5\nhedge = { delay = 0.05, max = 1, share = 1 }\n" ..
                         "rate = { limit = 1000, burst = 3 }\n")
    -- 100 calls of 0.5 s one after another: a limiter of 1000 a second
    -- refills between them, so every call hedges (2 of 100 did: the calls
    -- met the limiter at the real time of their begin, all at once)
    local r = proc.run({"simulate", path, "--latency", "0.5", "--calls", "100", "--json"})
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(100, proc.json.decode(proc.lines(r.stdout)[1]).hedges)
    -- 5 tokens a second, one at a time: each call's first attempt waits for
    -- its token (0.2 s apart), as run's does
    r = proc.run({"simulate", path, "--set", "rate.limit=5", "--set", "rate.burst=1", "--latency", "0.01",
                  "--calls", "20", "--json"})
    assert.are.equal(0, r.code, r.stderr)
    local with = proc.json.decode(proc.lines(r.stdout)[1])
    assert.is_true(with.p50 >= 0.19, "p50 " .. with.p50)
  end)

  it("gives each run fresh guards of its own: the run without the hedge inherits no spent budget", function ()
    -- every attempt times out; a budget of 4 tokens allows one retry in all
    local r = proc.run({"simulate", "http", "--set", "attempt_timeout=0.5", "--set", "budget.max_tokens=4",
                        "--set", "budget.token_ratio=0.1", "--set", "budget.reserve=0",
                        "--latency", "2", "--calls", "20", "--json"})
    assert.are.equal(0, r.code, r.stderr)
    local lines = proc.lines(r.stdout)
    local with, without = proc.json.decode(lines[1]), proc.json.decode(lines[2])
    assert.are.equal(21, with.requests)
    assert.are.equal(with.requests, without.requests)
    assert.are.equal(with.p99, without.p99)
  end)

  it("stops at a policy error and names it (exit 3): no numbers from calls that ended in errors", function ()
    local dir = proc.tmpdir()
    for _, hook in ipairs({"is_transient", "is_success"}) do
      local path = policy(dir, ("max_attempts = 5\ndeadline = 100\nattempt_timeout = 0.5\n" ..
                                "hedge = { delay = 0.05 }\n" ..
                                "function %s(status, body, info) error(\"%s broke\") end\n"):format(hook, hook))
      for _, json in ipairs({false, true}) do
        local r = proc.run({"simulate", path, "--latency", "0.01,1@0.5", "--calls", "100", json and "--json" or nil})
        assert.are.equal(3, r.code, hook .. ": " .. r.stdout .. r.stderr)
        assert.matches("luaretry: simulate: " .. hook .. ": " .. path:gsub("%p", "%%%0") .. ":5: " .. hook .. " broke",
                       r.stderr)
        assert.is_nil(r.stdout:find("p99", 1, true), r.stdout)
      end
    end
    proc.rmtree(dir)
  end)

  it("refuses a latency it cannot read, and --calls alone", function ()
    local r = proc.run({"simulate", "http", "--latency", "0.01,x"})
    assert.are.equal(2, r.code)
    assert.matches("%-%-latency 0%.01,x: expected BASE or BASE,SLOW@FRACTION", r.stderr)
    r = proc.run({"simulate", "http", "--calls", "10"})
    assert.are.equal(2, r.code)
    assert.matches("%-%-calls needs %-%-latency", r.stderr)
  end)
end)
