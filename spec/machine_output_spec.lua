-- Output for machines: --stats=json, the summary object
-- that ends --log-json, --metrics-file in Prometheus's text format,
-- replaced whole.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
local proc = require "support.proc"

local FAST = { "--set", "backoff.initial=0.01", "--set", "backoff.jitter_max=0.01", "--seed", "3" }

local function run(args)
  local t = { "run", "http" }
  for _, a in ipairs(args) do t[#t + 1] = a end
  for _, a in ipairs(FAST) do t[#t + 1] = a end
  return proc.run(t, { timeout = 30 })
end

-- Prometheus text: { name = { help =, type =, value =, labels = } }; fails on a line that is not.
local function parse_prometheus(text)
  local metrics = {}
  for _, line in ipairs(proc.lines(text)) do
    local name, help = line:match("^# HELP (luaretry_[%w_]+) (.+)$")
    if name then
      metrics[name] = metrics[name] or {}
      metrics[name].help = help
    else
      local tname, kind = line:match("^# TYPE (luaretry_[%w_]+) (%a+)$")
      if tname then
        metrics[tname] = metrics[tname] or {}
        metrics[tname].type = kind
      else
        local mname, labels, value = line:match('^(luaretry_[%w_]+){(.-)} (%-?[%d.]+)$')
        assert.is_truthy(mname, "not a sample: " .. line)
        metrics[mname] = metrics[mname] or {}
        metrics[mname].labels, metrics[mname].value = labels, tonumber(value)
      end
    end
  end
  return metrics
end

describe("output for machines", function ()
  local srv, tmp

  proc.with_server(here .. "/fixtures/run/server.lua", function (s, t) srv, tmp = s, t end)

  it("--stats=json: one JSON object of the policy's counters on standard error", function ()
    local r = run({ srv.base .. "/flaky", "-q", "--stats=json" })
    assert.are.equal(0, r.code, r.stderr)
    local lines = proc.lines(r.stderr)
    assert.are.equal(1, #lines, r.stderr)
    local s = proc.json.decode(lines[1])
    assert.are.same({ "http", 1, 3, 2, 1, 0, "closed" },
                    { s.policy, s.calls, s.attempts, s.retries, s.successes, s.exhausted, s.breaker })
    assert.is_true(s.time_waited > 0)
  end)

  it("--log-json ends with a summary: verdict, attempts, total wait, exit status", function ()
    local log = tmp .. "/log.json"
    local r = run({ srv.base .. "/always503", "--set", "max_attempts=3", "-q", "--log-json", log })
    assert.are.equal(4, r.code, r.stderr)
    local lines = proc.lines(proc.readfile(log))
    assert.are.equal(4, #lines)
    local waited = 0
    for i = 1, 3 do waited = waited + proc.json.decode(lines[i]).wait end
    local s = proc.json.decode(lines[4])
    assert.are.same({ true, "exhausted", 3, 4, "http" }, { s.summary, s.verdict, s.attempts, s.exit, s.policy })
    assert.is_true(math.abs(s.total_wait - waited) < 1e-5, s.total_wait .. " vs " .. waited)
  end)

  it("--metrics-file: the counters in Prometheus text format, each with HELP and TYPE", function ()
    local file = tmp .. "/luaretry.prom"
    local r = run({ srv.base .. "/always503", "--set", "max_attempts=3", "-q", "--metrics-file", file })
    assert.are.equal(4, r.code, r.stderr)
    local m = parse_prometheus(proc.readfile(file))
    for name, v in pairs(m) do
      assert.is_string(v.help, name)
      assert.is_truthy(v.type == "counter" or v.type == "gauge", name)
      assert.are.equal('policy="http"', v.labels, name)
      if v.type == "counter" then assert.matches("_total$", name) end
    end
    assert.are.equal(1, m.luaretry_calls_total.value)
    assert.are.equal(3, m.luaretry_attempts_total.value)
    assert.are.equal(2, m.luaretry_retries_total.value)
    assert.are.equal(1, m.luaretry_exhausted_total.value)
    assert.are.equal(4, m.luaretry_exit_status.value)
    assert.are.equal(0, m.luaretry_breaker_state.value)
    assert.is_true(m.luaretry_wait_seconds_total.value > 0)
    assert.is_true(math.abs(m.luaretry_last_run_timestamp_seconds.value - os.time()) < 60)
  end)

  -- two tunings of one script against two services, kept apart: --set
  -- name was taken and then dropped (policy="http", fleet.key=http)
  it("--set name=NAME names the policy in the metrics, the log's summary, check and the fleet key", function ()
    local file, log = tmp .. "/named.prom", tmp .. "/named.json"
    local r = run({ srv.base .. "/new", "--set", "name=orders", "-q", "--metrics-file", file, "--log-json", log })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal('policy="orders"', parse_prometheus(proc.readfile(file)).luaretry_calls_total.labels)
    local lines = proc.lines(proc.readfile(log))
    assert.are.equal("orders", proc.json.decode(lines[#lines]).policy)
    r = proc.run({ "check", "http", "--set", "name=orders" })
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("tuning: name orders;", r.stdout, 1, true)
    assert.matches(" name=orders ", r.stdout, 1, true)
    assert.matches(" fleet.key=orders ", r.stdout, 1, true)
    -- a fleet.key of its own stays its own; name=none is the file's name again
    r = proc.run({ "check", "http", "--set", "name=orders", "--set", "fleet.key=shared" })
    assert.matches(" fleet.key=shared ", r.stdout, 1, true)
    r = proc.run({ "check", "http", "--set", "name=none" })
    assert.matches("tuning: name http;", r.stdout, 1, true)
  end)

  -- luaretry(1): --log-json "ends with one summary object", the metrics
  -- gauge is the "exit status of the run that wrote this file": a run
  -- that ended before or while its policy loaded (or on a bad URL found
  -- with it, or a batch's list that does not open) left an earlier run's
  -- summary ("exit":0) and metrics in place
  it("a run that ends before its call still ends --log-json with its summary and writes --metrics-file", function ()
    local log, file, bad = tmp .. "/l.json", tmp .. "/m.prom", tmp .. "/syntax.lua"
    proc.writefile(bad, "max_attempts = = 3\n")
    local function summary(count)
      local lines = proc.lines(proc.readfile(log))
      assert.are.equal(count, #lines, proc.readfile(log))
      return proc.json.decode(lines[count])
    end
    local cases = {
      { 3, "http", { "run", "http", srv.base .. "/new", "--set", "max_attempts=abc" } },
      { 3, bad, { "run", bad, srv.base .. "/new" } },
      { 3, "nosuchpolicy", { "run", "nosuchpolicy", srv.base .. "/new" } },
      { 2, "http", { "run", "http", "bad://x" } },
      { 2, "http", { "run", "http", "--urls", tmp .. "/none" } },
    }
    for _, case in ipairs(cases) do
      local code, policy, args = case[1], case[2], case[3]
      local r = run({ srv.base .. "/new", "-q", "--log-json", log, "--metrics-file", file })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(0, summary(2).exit)
      r = proc.run(proc.concat(args, { "-s", "--log-json", log, "--metrics-file", file }), { timeout = 30 })
      assert.are.equal(code, r.code, table.concat(args, " "))
      local s = summary(1) -- its summary alone: no attempt
      assert.are.same({ true, proc.null, 0, code, policy }, { s.summary, s.verdict, s.attempts, s.exit, s.policy })
      local m = parse_prometheus(proc.readfile(file))
      assert.are.equal(code, m.luaretry_exit_status.value, table.concat(args, " "))
      assert.are.equal('policy="' .. policy .. '"', m.luaretry_exit_status.labels)
      assert.is_true(math.abs(m.luaretry_last_run_timestamp_seconds.value - os.time()) < 60)
      -- no policy loaded: no counter, as none was kept
      if code == 3 then assert.is_nil(m.luaretry_calls_total) end
    end
    assert.are.same({ "l.json", "m.prom", "syntax.lua" }, proc.ls(tmp))
  end)

  -- the summary's verdict of a call that made no decision was "retry"
  -- (the name of no reason at all)
  it("a call that ends before its first attempt: the summary's verdict is null, not retry", function ()
    local fifo, log = tmp .. "/body.fifo", tmp .. "/l.json"
    assert.are.equal(0, proc.sh("mkfifo " .. proc.q(fifo)))
    local w = assert(io.open(fifo, "r+")) -- a writer that never ends the body
    finally(function () w:close() end)
    local r = run({ srv.base .. "/new", "-q", "--retry-max-time", "0.3", "-d", "@" .. fifo, "--log-json", log })
    assert.are.equal(5, r.code, r.stderr)
    assert.matches("did not end before the deadline", r.stderr)
    local lines = proc.lines(proc.readfile(log))
    assert.are.equal(1, #lines)
    local s = proc.json.decode(lines[1])
    assert.are.same({ proc.null, 0, 5 }, { s.verdict, s.attempts, s.exit })
  end)

  it("--metrics-file stays valid UTF-8 whatever bytes the policy's name holds", function ()
    local policy = tmp .. "/odd.lua"
    proc.writefile(policy, 'name = "caf\\195\\169 \\255\\254 \\"q\\" \\\\ \\n x"\n' ..
                           "max_attempts = 1\ndeadline = 10\n")
    local file = tmp .. "/odd.prom"
    local r = proc.run({ "run", policy, srv.base .. "/new", "-q", "--metrics-file", file }, { timeout = 30 })
    assert.are.equal(0, r.code, r.stderr)
    local text = proc.readfile(file)
    assert.is_truthy(utf8.len(text), "not UTF-8")
    local m = parse_prometheus(text)
    -- é kept, each stray byte U+FFFD, quote, backslash and newline escaped
    assert.are.equal('policy="caf\u{e9} \u{fffd}\u{fffd} \\"q\\" \\\\ \\n x"', m.luaretry_calls_total.labels)
  end)

  it("--metrics-file replaces the file whole (a new file renamed over it) and leaves no temporary", function ()
    local file = tmp .. "/luaretry.prom"
    proc.writefile(file, "old\n")
    local inode = proc.readfile_cmd("stat -c %i " .. proc.q(file))
    -- a reader holding the old file still reads the old one: it was replaced, not rewritten
    local old = io.open(file, "rb")
    local r = run({ srv.base .. "/new", "-q", "--metrics-file", file })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("old\n", old:read("a"))
    old:close()
    assert.are_not.equal(inode, proc.readfile_cmd("stat -c %i " .. proc.q(file)))
    assert.matches("luaretry_successes_total{policy=\"http\"} 1\n", proc.readfile(file))
    assert.are.same({ "luaretry.prom" }, proc.ls(tmp))
    -- a folder that does not exist: said, and the call's own status stands
    r = run({ srv.base .. "/new", "-q", "--metrics-file", tmp .. "/none/x.prom" })
    assert.are.equal(0, r.code)
    assert.matches("%-%-metrics%-file", r.stderr)
  end)

  -- its lines were lost without a word (exit 0, nothing on standard error)
  it("--log-json that cannot be written (a full disk): said, naming the file", function ()
    for _, urls in ipairs { { srv.base .. "/new" }, { srv.base .. "/new", srv.base .. "/new" } } do
      local args = { "-q", "--log-json", "/dev/full", "-o", "/dev/null" }
      if #urls > 1 then args[#args] = nil; args[#args] = nil end
      for _, u in ipairs(urls) do args[#args + 1] = u end
      local r = run(args)
      assert.are.equal(0, r.code, r.stderr)
      assert.matches("^luaretry: %-%-log%-json /dev/full: [^\n]*No space left on device\n$", r.stderr)
    end
  end)

  -- the open the signal cut was "Interrupted system call", exit 2
  it("--log-json FIFO with no reader yet: a stop signal is an interruption, exit 130", function ()
    local fifo = tmp .. "/log.fifo"
    assert.are.equal(0, proc.sh("mkfifo " .. proc.q(fifo)))
    for _, urls in ipairs { 1, 2 } do
      local jobdir = proc.tmpdir()
      local args = { "run", "http", "-q", "--log-json", fifo, srv.base .. "/new" }
      if urls == 2 then args[#args + 1] = srv.base .. "/new" end
      local job = proc.spawn(args, jobdir)
      finally(function () job:stop(); proc.rmtree(jobdir) end)
      assert.is_truthy(job:blocked_on_pipe(), "blocked in the open or the read")
      job:signal("TERM")
      local code = job:wait(5)
      local stderr = job:stderr()
      assert.are.equal(130, code, stderr)
      assert.are.equal("luaretry: interrupted\n", stderr)
      assert.are.equal(0, #srv:requests())
    end
  end)

  -- A signal before the FIFO's open (here while the policy loads, 1 s of
  -- its own work) was seen by nothing: the open then waited for a reader
  -- for ever (final106's hang beside 6 busy loops; here every time).
  it("--log-json FIFO: a stop signal before its open is an interruption too, exit 130", function ()
    local fifo, policy = tmp .. "/early.fifo", tmp .. "/slow_load.lua"
    assert.are.equal(0, proc.sh("mkfifo " .. proc.q(fifo)))
    proc.writefile(policy, "max_attempts = 2\nlocal n = 0\nfor i = 1, 3e8 do n = n + i end\n")
    local jobdir = proc.tmpdir()
    local job = proc.spawn({ "run", policy, "--set", "time_limit=60", "-q", "--log-json", fifo,
                             srv.base .. "/new" }, jobdir)
    finally(function () job:stop(); proc.rmtree(jobdir) end)
    -- loading: its CPU time grows (once it is asleep in the open, the
    -- signal cuts the open, and the case passes either way)
    assert.is_truthy(proc.wait_for(function ()
      local st = proc.readfile("/proc/" .. job.pid .. "/stat") or ""
      local utime = tonumber(st:match("^%d+ %b() %a" .. (" %S+"):rep(10) .. " (%d+)"))
      return utime and utime >= 10 -- clock ticks: 0.1 s
    end, 10))
    job:signal("TERM")
    assert.are.equal(130, job:wait(20), job:stderr())
    assert.are.equal("luaretry: interrupted\n", job:stderr())
    assert.are.equal(0, #srv:requests())
  end)

  -- the log took the closed standard output's number, 1: the body went
  -- into the log (exit 0), where curl fails with 23
  it("standard output closed (>&-): the body never goes into --log-json's file; exit 1, said", function ()
    local log, err = tmp .. "/closed.json", tmp .. "/closed.err"
    local code = proc.sh(proc.q(proc.bin) .. " run http -q --log-json " .. proc.q(log) .. " " ..
                         proc.q(srv.base .. "/new") .. " >&- 2>" .. proc.q(err))
    local stderr = proc.readfile(err)
    assert.are.equal(1, code, stderr)
    assert.matches("standard output: writing: Bad file descriptor", stderr)
    for _, line in ipairs(proc.lines(proc.readfile(log))) do
      assert.is_table(proc.json.decode(line), line)
    end
  end)

  it("a batch: one summary for all its calls, and the metrics of all", function ()
    local log, file = tmp .. "/log.json", tmp .. "/m.prom"
    local r = run({ srv.base .. "/new", srv.base .. "/notfound", "-q", "--log-json", log,
                    "--metrics-file", file, "--stats=json" })
    assert.are.equal(1, r.code, r.stderr)
    local lines = proc.lines(proc.readfile(log))
    local s = proc.json.decode(lines[#lines])
    assert.are.same({ true, "final", 2, 1 }, { s.summary, s.verdict, s.attempts, s.exit })
    local m = parse_prometheus(proc.readfile(file))
    assert.are.equal(2, m.luaretry_calls_total.value)
    assert.are.equal(1, m.luaretry_finals_total.value)
    assert.are.equal(1, m.luaretry_exit_status.value)
    assert.matches('{"policy":"http","calls":2,', r.stderr)
  end)
end)
