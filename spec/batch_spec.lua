-- `luaretry run` with many URLs: each its own retried call of one policy,
-- sharing its budget, breaker and counters, at most --parallel-max transfers at
-- once.  The real build/luaretry (LUARETRY_BIN if set) through real libcurl
-- against the real fault server on 127.0.0.1, stopped by its PID.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
local proc = require "support.proc"

local HTTP = proc.root .. "/policies/http.lua"
local DIR = here .. "/fixtures/batch/"
local FAST = { "--set", "backoff.initial=0.05", "--set", "backoff.jitter_max=0.05", "--seed", "1" }

local function run(args, opts)
  return proc.run(args, opts or { timeout = 30 })
end

local concat = proc.concat


-- The summary lines ("luaretry: [i] URL: verdict, ...") by URL number.
local function summaries(stderr)
  local t = {}
  for _, line in ipairs(proc.lines(stderr)) do
    local i, rest = line:match("^luaretry: %[(%d+)%] (http://%S+: .*)$")
    if i then t[tonumber(i)] = rest end
  end
  return t
end

local function count(t) local n = 0; for _ in pairs(t) do n = n + 1 end; return n end

describe("luaretry run, many URLs", function ()
  local srv, tmp

  proc.with_server(DIR .. "server.lua", function (s, t) srv, tmp = s, t end)

  local function urls(pattern, n)
    local t = {}
    for i = 1, n do t[i] = srv.base .. pattern:format(i) end
    return t
  end

  local function url_file(list)
    local path = tmp .. "/urls.txt"
    proc.writefile(path, table.concat(list, "\n") .. "\n")
    return path
  end

  it("20 flaky URLs (503, 503, 200), --parallel-max 8: all succeed, 60 requests, 20 files", function ()
    local list = urls("/flaky/f%02d.txt", 20)
    local out = tmp .. "/out"
    proc.sh("mkdir " .. proc.q(out))
    -- -v: every attempt and every URL (without it, what failed and a summary);
    -- the batch's mechanics, not its guards: two failures in three are far
    -- past what http.lua's budget allows (defaults_spec.lua)
    local r = run(concat({ "run", HTTP, "-v", "--parallel-max", "8", "--output-dir", out,
                           "--set", "budget=none" }, FAST, list))
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(60, #srv:requests())
    local names = proc.ls(out)
    assert.are.equal(20, #names)
    for i = 1, 20 do
      local name = ("f%02d.txt"):format(i)
      assert.are.equal("body of /flaky/" .. name .. "\n", proc.readfile(out .. "/" .. name))
    end
    assert.are.same({}, proc.leftovers(out))
    assert.are.equal("", r.stdout)
    -- one summary per URL, and the attempt lines carry the URL's number
    local s = summaries(r.stderr)
    assert.are.equal(20, count(s))
    for i = 1, 20 do
      assert.matches("^" .. list[i]:gsub("%p", "%%%0") .. ": success, 3 attempts, status 200, ", s[i])
      assert.matches("luaretry: %[" .. i .. "%] attempt 3/10: 200 %-> success", r.stderr)
    end
  end)

  it("an outage: 100 URLs always 503, --parallel-max 8, a budget of 10 tokens: < 130 requests, exit 6", function ()
    local file = url_file(urls("/always503/%d", 100))
    local r = run({ "run", DIR .. "budget.lua", "--parallel-max", "8", "--urls", file, "-q",
                    "--seed", "1", "--stats" })
    assert.are.equal(6, r.code, r.stderr)
    local seen = #srv:requests()
    assert.is_true(seen >= 100, "only " .. seen .. " requests")
    assert.is_true(seen < 130, seen .. " requests")
    assert.matches("stats: calls 100, attempts " .. seen .. ",", r.stderr)
    assert.matches("budget refusals 100,", r.stderr)
    -- -q: no attempt lines, but the summaries
    assert.is_nil(r.stderr:find("attempt 1/5", 1, true))
    assert.are.equal(100, count(summaries(r.stderr)))
  end)

  it("the exit status is the worst of the calls: 200, 404 (1), exhausted (4) -> 4", function ()
    local list = { srv.base .. "/flaky/w", srv.base .. "/notfound/1", srv.base .. "/always503/1" }
    local r = run(concat({ "run", HTTP, "-v", "--parallel-max", "3", "--set", "max_attempts=3" }, FAST, list))
    assert.are.equal(4, r.code, r.stderr)
    local s = summaries(r.stderr)
    assert.matches(": success, 3 attempts, status 200, .*exit 0$", s[1])
    assert.matches(": final, 1 attempt, status 404, .*exit 1; body: no such thing$", s[2])
    assert.matches(": exhausted, 3 attempts, status 503, .*exit 4; body: busy$", s[3])
    -- without the exhausted one: 1
    r = run(concat({ "run", HTTP, "--parallel-max", "2" }, FAST, { list[1], list[2] }))
    assert.are.equal(1, r.code, r.stderr)
  end)

  describe("a circuit breaker (failures 3)", function ()
    -- max_attempts=1 below: no retries (see the pending case at the end)
    it("--parallel-max 1: the third failure opens it; no request after that, every other URL refused", function ()
      local r = run(concat({ "run", DIR .. "breaker.lua", "--stats", "--set", "max_attempts=1" },
                           urls("/always503/%d", 20)))
      assert.are.equal(6, r.code, r.stderr)
      assert.are.equal(3, #srv:requests())
      local s = summaries(r.stderr)
      for i = 1, 3 do assert.matches(": exhausted, 1 attempt, status 503, ", s[i]) end
      for i = 4, 20 do assert.matches(": circuit_open, 0 attempts, status none, ", s[i]) end
      assert.matches("circuit refusals 17, breaker openings 1,", r.stderr)
    end)

    it("--parallel-max 8: once it is open, no new call reaches the server", function ()
      local r = run({ "run", DIR .. "breaker.lua", "-v", "--parallel-max", "8", "--set", "max_attempts=1",
                      "--urls", url_file(urls("/always503/%d", 40)) })
      assert.are.equal(6, r.code, r.stderr)
      local seen = #srv:requests()
      -- the third failure opens it; at most the 7 other transfers in flight then end
      assert.is_true(seen >= 3 and seen <= 3 + 7, seen .. " requests")
      local lines = proc.lines(r.stderr)
      local opened, attempts, after = nil, 0, 0
      for i, line in ipairs(lines) do
        if line == "luaretry: breaker: open" then opened = i end
        if line:match("^luaretry: %[%d+%] attempt 1/1:") then
          attempts = attempts + 1
          if opened then after = after + 1 end
        end
      end
      assert.is_truthy(opened, r.stderr)
      assert.are.equal(seen, attempts)
      -- the line of the failure that opened it comes after "breaker: open"
      -- (the breaker changes inside that attempt's decision), then at most
      -- the 7 other transfers in flight
      assert.is_true(after <= 8, after .. " attempts ended after the breaker opened")
      local never = 0
      for _, line in pairs(summaries(r.stderr)) do
        if line:find(": circuit_open, 0 attempts,", 1, true) then never = never + 1 end
      end
      assert.are.equal(40 - seen, never)
    end)

    it("with retries: a retry scheduled before it opened is not sent once it is open", function ()
      -- one at a time: /flaky/a fails and waits 0.2 s (its slot free); the
      -- next calls fail meanwhile and open the breaker (3 in a row); when
      -- /flaky/a's wait ends its retry is refused, never sent
      local list = { srv.base .. "/flaky/a", srv.base .. "/always503", srv.base .. "/always503",
                     srv.base .. "/always503" }
      local r = run(concat({ "run", DIR .. "breaker.lua", "-v", "--parallel-max", "1" }, list))
      assert.are.equal(6, r.code, r.stderr)
      assert.are.equal(1, #srv:requests_on("/flaky/a"), r.stderr)
      assert.matches("%[1%] before attempt 2: circuit_open %(breaker%)", r.stderr)
    end)
  end)

  -- without -Z (curl's --parallel-max needs it; luaretry(1) says so)
  it("--parallel-max 8 overlaps: 8 URLs each delayed 2 s finish in well under 16 s", function ()
    -- rate=none: no adaptive rate, so no slow start (below): all 8 at once
    local r = run(concat({ "run", HTTP, "--parallel-max", "8", "-q", "--set", "rate=none" },
                         urls("/slower/%d", 8)))
    assert.are.equal(0, r.code, r.stderr)
    -- the margin is a busy machine's start-up
    assert.is_true(r.secs < 8, ("took %.3f s"):format(r.secs))
    local seen = srv:requests()
    assert.are.equal(8, #seen)
    -- the server's own times: all 8 came before it answered the first (2 s
    -- after it came); one at a time, the second would come after that
    local spread = seen[8].time - seen[1].time
    assert.is_true(spread < 2, ("the requests did not overlap: spread over %.3f s"):format(spread))
    -- each body once on standard output, whole
    for i = 1, 8 do assert.is_truthy(r.stdout:find("slower /slower/" .. i .. "\n", 1, true)) end
    -- the default is one at a time
    srv:reset()
    r = run(concat({ "run", HTTP, "-q" }, urls("/slow/%d", 3)))
    assert.are.equal(0, r.code, r.stderr)
    assert.is_true(r.secs >= 1.5, ("took %.3f s"):format(r.secs))
  end)

  it("with an adaptive rate (http.lua's) a batch starts one transfer, then doubles while the server is slow to answer", function ()
    -- each answer comes 2 s after its request: a rate limiter would have
    -- answered at once, so the slow start lets more go (the server's log
    -- tells when each came)
    local r = run(concat({ "run", HTTP, "--parallel-max", "8", "-q" }, urls("/slower/%d", 7)))
    assert.are.equal(0, r.code, r.stderr)
    local seen = srv:requests()
    assert.are.equal(7, #seen)
    -- 1, 2, 4, then all 7 in flight, a tenth of a second apart: the last
    -- starts 0.3 s after the first (all at once: the same instant, 0.000 s
    -- seen).  Two thirds of it are left to a busy machine, whose server may
    -- read the first request late (its time is when the server read it).
    local spread = seen[7].time - seen[1].time
    assert.is_true(spread >= 0.1, ("the 7 requests within %.3f s: not a slow start"):format(spread))
    -- not one at a time (the second after the first answer, 2 s on): a
    -- slow server does not hold the batch
    assert.is_true(spread < 2, ("the 7 requests spread over %.3f s"):format(spread))
  end)

  it("a slow start is not held by a transfer that hangs: a second goes a tenth of a second later", function ()
    local list = concat({ srv.base .. "/hang/1" }, urls("/ok/%d", 3))
    local r = run(concat({ "run", HTTP, "--parallel-max", "4", "-q", "--set", "attempt_timeout=5",
                           "--set", "max_attempts=1" }, list))
    assert.are.equal(4, r.code, r.stderr)  -- /hang/1 timed out
    local seen = srv:requests()
    assert.are.equal(4, #seen)
    assert.are.equal("/hang/1", seen[1].path)
    -- the hang ends at its 5 s timeout; the next went long before (that
    -- it waits its tenth of a second, the slow start's, is the test above's)
    local after = seen[2].time - seen[1].time
    assert.is_true(after < 4, ("the second request %.3f s after the first"):format(after))
  end)

  it("a waiting call holds no transfer slot: --parallel-max 1 goes on while a call backs off", function ()
    -- call 1 waits 0.75 s before its retry; calls 2 and 3 (0.5 s each) take
    -- the slot meanwhile; the retry, due during call 3, goes before call 4
    local list = concat({ srv.base .. "/flaky/x" }, urls("/slow/%d", 3))
    local r = run(concat({ "run", HTTP, "--set", "backoff.initial=0.75", "--set",
                           "backoff.jitter_max=0", "--set", "max_attempts=2", "-q" }, list))
    assert.are.equal(4, r.code, r.stderr)  -- /flaky/x needs 3 attempts
    local seen = srv:requests()
    local paths = {}
    for i, q in ipairs(seen) do paths[i] = q.path end
    -- /slow/1 took the slot during the backoff; the retry, due 0.75 s
    -- after the first attempt, goes before /slow/3, which cannot start
    -- before 1 s (after two answers of 0.5 s): a busy machine may put it
    -- before or after /slow/2
    assert.are.equal(5, #paths, table.concat(paths, " "))
    assert.are.same({ "/flaky/x", "/slow/1" }, { paths[1], paths[2] })
    assert.is_true(paths[3] == "/flaky/x" or paths[4] == "/flaky/x", table.concat(paths, " "))
    assert.are.equal("/slow/3", paths[5], table.concat(paths, " "))
    assert.is_true(seen[2].time - seen[1].time < 0.75, "/slow/1 waited for the backoff (0.75 s)")
    -- the retry waited its backoff (0.75 s; without it, at once): a
    -- server on a busy machine may have read the first request late
    local retry = paths[3] == "/flaky/x" and seen[3] or seen[4]
    local waited = retry.time - seen[1].time
    assert.is_true(waited >= 0.5, ("the retry came %.3f s after the first attempt"):format(waited))
  end)

  describe("a list read as it goes", function ()
    it("--urls - from a pipe: a bad URL fails alone, the others run, exit 2", function ()
      local list = { srv.base .. "/ok/1", "http://[bad", srv.base .. "/ok/3" }
      local file = url_file(list)
      local err = tmp .. "/err"
      local code = proc.sh("cat " .. proc.q(file) .. " | " .. proc.q(proc.bin) .. " run " ..
                           proc.q(HTTP) .. " -v --urls - >/dev/null 2>" .. proc.q(err))
      local stderr = proc.readfile(err)
      assert.are.equal(2, code, stderr)
      assert.matches("bad URL [^\n]* %(%[2%]%)", stderr)
      local s = summaries(stderr)
      assert.matches(": success, 1 attempt,", s[1])
      assert.matches(": success, 1 attempt,", s[3])
      assert.are.equal(1, #srv:requests_on("/ok/1"))
      assert.are.equal(1, #srv:requests_on("/ok/3"))
    end)

    -- it was a usage error's six lines (the synopsis) in the midst of the
    -- batch's, shown under -s too
    it("a bad URL from a pipe is one line, as a failed URL's; -s shows none", function ()
      local file = url_file({ srv.base .. "/ok/1", "http://[bad", srv.base .. "/ok/3" })
      local err = tmp .. "/err"
      for _, quiet in ipairs { "-q", "-s" } do
        local code = proc.sh("cat " .. proc.q(file) .. " | " .. proc.q(proc.bin) .. " run " ..
                             proc.q(HTTP) .. " " .. quiet .. " --urls - >/dev/null 2>" .. proc.q(err))
        local stderr = proc.readfile(err)
        assert.are.equal(2, code, stderr)
        if quiet == "-s" then
          assert.are.equal("", stderr)
        else
          assert.are.equal("luaretry: run: bad URL http://[bad ([2]): Bad IPv6 address\n", stderr)
        end
      end
    end)

    -- luaretry(1): the worst status, 2 among them (it was not placed)
    it("a bad URL from a pipe (2) outranks a final (1), exhausted (4) and refused (6) URL", function ()
      local list = { srv.base .. "/notfound/1", "http://[bad" }
      for i = 1, 4 do list[#list + 1] = srv.base .. "/always503/" .. i end
      local file = url_file(list)
      local err = tmp .. "/err"
      local code = proc.sh("cat " .. proc.q(file) .. " | " .. proc.q(proc.bin) .. " run " ..
                           proc.q(DIR .. "breaker.lua") .. " -v --set max_attempts=1 --urls - >/dev/null 2>" ..
                           proc.q(err))
      local stderr = proc.readfile(err)
      assert.are.equal(2, code, stderr)
      local s = summaries(stderr)
      assert.matches("exit 1; ", s[1])
      assert.matches("exit 4; ", s[3])
      assert.matches(": circuit_open, .*exit 6$", s[6])
    end)

    -- the URLs after it were begun, --fail-early or not
    it("--fail-early: a bad URL from a pipe is a failure; no URL after it begins", function ()
      local file = url_file({ srv.base .. "/ok/1", "http://[bad", srv.base .. "/ok/3", srv.base .. "/ok/4" })
      local err = tmp .. "/err"
      local code = proc.sh("cat " .. proc.q(file) .. " | " .. proc.q(proc.bin) .. " run " ..
                           proc.q(HTTP) .. " -q --fail-early --urls - >/dev/null 2>" .. proc.q(err))
      local stderr = proc.readfile(err)
      assert.are.equal(2, code, stderr)
      assert.are.equal(1, #srv:requests(), stderr)
      local said = "luaretry: --fail-early: [2] failed; the URLs from [3] on were not begun\n"
      assert.are.equal(said, stderr:sub(-#said))
    end)

    it("a regular file is checked whole first: a bad URL on its last line sends nothing", function ()
      local list = urls("/ok/u%d", 5)
      list[#list + 1] = "http://[bad"
      local r = run(concat({ "run", HTTP, "--urls", url_file(list) }, FAST))
      assert.are.equal(2, r.code)
      assert.matches("bad URL [^\n]*line 6%)", r.stderr)
      assert.are.equal(0, #srv:requests())
      -- a line's bytes are shown escaped: a terminal's controls do nothing
      r = run(concat({ "run", HTTP, "--urls", url_file({ "http://exa\27[31mmple .com/" }) }, FAST))
      assert.are.equal(2, r.code)
      assert.matches("bad URL http://exa\\x1b[31mmple .com/", r.stderr, 1, true)
      assert.is_nil(r.stderr:find("\27", 1, true))
    end)

    -- the URL was cut at the NUL and the rest of the line dropped in
    -- silence (a line starting with one was skipped as blank)
    it("a line holding a NUL byte is refused, naming its line; nothing sent", function ()
      local path = tmp .. "/nul.txt"
      for _, line in ipairs { srv.base .. "/ok/a\0/evil", "\0" .. srv.base .. "/ok/b" } do
        proc.writefile(path, srv.base .. "/ok/first\n# a comment \0 is a comment\n" .. line .. "\n")
        local r = run({ "run", HTTP, "--urls", path })
        assert.are.equal(2, r.code, r.stderr)
        assert.matches("^luaretry: run: %-%-urls [^\n]*nul%.txt, line 3: [^\n]*NUL byte", r.stderr)
        assert.are.equal(0, #srv:requests())
      end
    end)

    it("a line longer than any URL libcurl accepts (8 MB) is refused at once, never read whole", function ()
      -- a regular file: a URL, then 64 MB without a newline (sparse)
      local file = url_file({ srv.base .. "/ok/1" })
      assert.are.equal(0, proc.sh("truncate -s 64M " .. proc.q(file)))
      local r = run(concat({ "run", HTTP, "--urls", file }, FAST))
      assert.are.equal(2, r.code, r.stderr)
      assert.matches("run: %-%-urls [^\n]*, line 2: longer than 8000000 bytes, more than any URL " ..
                     "libcurl accepts: refused\n", r.stderr)
      assert.are.equal(0, #srv:requests())
      -- 8,000,000 bytes is what curl still takes: not refused here
      local edge = "http://127.0.0.1:1/"
      edge = edge .. ("a"):rep(8000000 - #edge)
      r = run(concat({ "run", HTTP, "--urls", url_file({ edge }), "--set", "max_attempts=1" }, FAST))
      assert.is_nil(r.stderr:find("longer than", 1, true), r.stderr:sub(1, 300))
      assert.are.equal(4, r.code, r.stderr:sub(1, 300))
      -- a pipe of a gigabyte on one line, under a 300 MB address space
      -- (plain runs: ASan reserves more than that for itself)
      local err = tmp .. "/err"
      local limit = proc.asan() and "" or "ulimit -v 300000; "
      local code = proc.sh(limit .. "head -c 1000000000 /dev/zero | tr '\\0' a | timeout -s KILL 30 " ..
                           proc.q(proc.bin) .. " run " .. proc.q(HTTP) .. " --urls - >/dev/null 2>" .. proc.q(err))
      local stderr = proc.readfile(err)
      assert.are.equal(2, code, stderr)
      assert.matches("run: %-%-urls %-, line 1: longer than 8000000 bytes", stderr)
    end)

    it("memory does not grow with the list: 10,000 URLs peak within 3 MiB of 1,000", function ()
      local function peak(n)
        local list = {}
        for i = 1, n do list[i] = srv.base .. "/ok/" .. i end
        local dir = tmp .. "/job" .. n  -- one folder per job: its own end marker
        proc.sh("mkdir " .. proc.q(dir))
        local job = proc.spawn(concat({ "run", HTTP, "--parallel-max", "16", "-q",
                                        "--urls", url_file(list) }, FAST), dir)
        finally(function () job:stop() end)
        local rss = proc.watch_rss(job, 120)
        assert.are.equal(0, job:wait(5), job:stderr())
        srv:reset()
        return rss
      end
      local small, big = peak(1000), peak(10000)
      if not proc.asan() then
        assert.is_true(big - small < 3 * 1024 * 1024,
                       ("peak RSS %.1f MiB for 1,000 URLs, %.1f MiB for 10,000"):format(
                         small / 1048576, big / 1048576))
      end
    end)
  end)

  describe("signals", function ()
    it("SIGINT during a batch: exit 130 within 100 ms, no temporary file", function ()
      local out = tmp .. "/out"
      proc.sh("mkdir " .. proc.q(out))
      local list = {}
      for i = 1, 10 do
        list[#list + 1] = srv.base .. "/hang/" .. i
        list[#list + 1] = srv.base .. "/always503/" .. i
        list[#list + 1] = srv.base .. "/ok/" .. i
      end
      local job = proc.spawn(concat({ "run", HTTP, "-v", "--parallel-max", "4", "--output-dir", out,
                                      "--set", "backoff.initial=30", "--urls", url_file(list) }), tmp)
      finally(function () job:stop() end)
      assert.is_truthy(proc.wait_for(function () return #srv:requests() >= 4 end, 5))
      assert.is_truthy(proc.wait_for(function () return (job:stderr() or ""):find("retry in") end, 5))
      local sent = job:signal("INT")
      local code, ended = job:wait(5)
      assert.are.equal(130, code)
      -- the alternative waits 30 s: a loaded machine keeps 2 s
      assert.is_true(ended - sent < 2, ("exited %.3f s after the signal"):format(ended - sent))
      assert.are.same({}, proc.leftovers(out))
      -- every URL begun has its summary; the list was read no further, and
      -- the last line says where to pick it up
      local s = summaries(job:stderr())
      local from = tonumber(job:stderr():match("luaretry: interrupted: the URLs from %[(%d+)%] on were not begun\n$"))
      assert.is_truthy(from, job:stderr())
      assert.is_true(from > 4 and from <= 30)
      assert.are.equal(from - 1, count(s))
      for i = 1, from - 1 do assert.is_truthy(s[i], "no summary for [" .. i .. "]") end
      assert.matches(": cancelled, ", s[1])
    end)

    -- the open or read the signal cut was a read error: "Interrupted
    -- system call", "holds no URL", the synopsis, exit 2
    it("SIGTERM while the list from a pipe is awaited: exit 130, said as an interruption", function ()
      local fifo = tmp .. "/list.fifo"
      assert.are.equal(0, proc.sh("mkfifo " .. proc.q(fifo)))
      -- in the open (no writer yet), the first line's read, the second's
      for _, case in ipairs { "open", "first", "second" } do
        local jobdir = proc.tmpdir()
        local job = proc.spawn({ "run", HTTP, "-q", "--urls", fifo }, jobdir)
        finally(function () job:stop(); proc.rmtree(jobdir) end)
        -- read and write: never blocks; luaretry's open then finds a writer
        local w = case ~= "open" and assert(io.open(fifo, "r+"))
        if case == "second" then
          w:write(srv.base .. "/ok/1\n")
          w:flush()
          assert.is_truthy(proc.wait_for(function () return #srv:requests() >= 1 end, 5))
        end
        assert.is_truthy(job:waits_for_list(fifo), "waits in the open or for the list")
        job:signal("TERM")
        local code = job:wait(5)
        local stderr = job:stderr()
        if w then w:close() end
        assert.are.equal(130, code, case .. ": " .. tostring(stderr))
        assert.are.equal("luaretry: interrupted\n", stderr, case)
        srv:reset()
      end
    end)
    -- The signal came while a transfer was in flight, not while the list
    -- was read: the batch ends, and its last look at the list (is a URL
    -- left unbegun?) must not wait on a pipe whose writer is still there.
    -- It did, until the writer closed (found while looking into the
    -- "second" case above, which failed once beside 6 busy loops, final94).
    it("SIGTERM while a URL from a pipe is in flight: exit 130 without waiting on the pipe", function ()
      local fifo = tmp .. "/inflight.fifo"
      assert.are.equal(0, proc.sh("mkfifo " .. proc.q(fifo)))
      local jobdir = proc.tmpdir()
      local job = proc.spawn({ "run", HTTP, "-q", "--urls", fifo }, jobdir)
      local w = assert(io.open(fifo, "r+"))
      finally(function () w:close(); job:stop(); proc.rmtree(jobdir) end)
      w:write(srv.base .. "/hang/1\n")
      w:flush()
      assert.is_truthy(proc.wait_for(function () return #srv:requests() >= 1 end, 5))
      job:signal("TERM")
      local code = job:wait(5)
      local stderr = job:stderr()
      assert.are.equal(130, code, tostring(stderr))
      assert.matches(": cancelled, 1 attempt, .*\nluaretry: interrupted\n$", stderr)
      srv:reset()
    end)

    -- luaretry(1): the list is read as it comes, and a pause of its writer
    -- holds no transfer: a URL in flight ends and is said while the writer
    -- has not written the next line.  The batch waited in the list's read,
    -- so a URL answered in 0.5 s ended only when the next line came.
    it("-Z from a pipe whose writer pauses: a URL in flight ends meanwhile", function ()
      local fifo = tmp .. "/pause.fifo"
      assert.are.equal(0, proc.sh("mkfifo " .. proc.q(fifo)))
      local jobdir = proc.tmpdir()
      local job = proc.spawn({ "run", HTTP, "-Z", "-v", "--output-dir", jobdir, "--urls", fifo }, jobdir)
      local w = assert(io.open(fifo, "r+"))
      finally(function () if io.type(w) == "file" then w:close() end; job:stop(); proc.rmtree(jobdir) end)
      w:write(srv.base .. "/slow/1\n")
      w:flush()
      local function said(i)
        return summaries(job:stderr() or "")[i]
      end
      -- the writer pauses until [1] is said (10 s: far past its 0.5 s)
      local first = proc.wait_for(function () return said(1) end, 10)
      assert.is_truthy(first, "[1] not said while the list paused: " .. tostring(job:stderr()))
      assert.matches(": success, 1 attempt, status 200, ", first)
      -- a line in two writes, a pause between: one URL, the whole line's
      w:write(srv.base .. "/ok/")
      w:flush()
      assert.is_truthy(job:waits_for_list(fifo), "waits for the list")
      w:write("2\n")
      w:close()
      assert.are.equal(0, job:wait(10), job:stderr())
      assert.matches("/ok/2: success, 1 attempt, status 200, ", said(2))
      local paths = {}
      for _, r in ipairs(srv:requests()) do paths[#paths + 1] = r.path end
      assert.are.same({ "/slow/1", "/ok/2" }, paths)
      srv:reset()
    end)

    -- luaretry(1): after --fail-early the URLs not begun are said, from a
    -- pipe when its next line is there; the batch never waits on the
    -- writer to say so (it did, as above)
    it("--fail-early from a pipe whose writer stays: ends at once, naming the URLs not begun if a line is there", function ()
      for _, after in ipairs { "", srv.base .. "/ok/2\n" } do
        local fifo = proc.tmpdir() .. "/early.fifo"
        assert.are.equal(0, proc.sh("mkfifo " .. proc.q(fifo)))
        local jobdir = proc.tmpdir()
        local job = proc.spawn({ "run", HTTP, "-q", "--fail-early", "--urls", fifo }, jobdir)
        local w = assert(io.open(fifo, "r+"))
        finally(function () w:close(); job:stop(); proc.rmtree(jobdir) end)
        w:write(srv.base .. "/notfound/1\n" .. after)
        w:flush()
        local code = job:wait(5)
        local stderr = job:stderr()
        assert.is_truthy(code, "no exit within 5 s: " .. tostring(stderr))
        assert.are.equal(tonumber(stderr:match("/notfound/1: final, .-, exit (%d+)")), code, stderr)
        local said = "--fail-early: [1] failed; the URLs from [2] on were not begun"
        assert.are.equal(after ~= "", stderr:find(said, 1, true) ~= nil, stderr)
        assert.are.equal(0, #srv:requests_on("/ok/2"))
        srv:reset()
      end
    end)
  end)

  describe("options", function ()
    it("--urls FILE skips blank lines and # comments; positional URLs come first", function ()
      local path = tmp .. "/list"
      proc.writefile(path, "# a comment\n\n  " .. srv.base .. "/ok/b  \r\n\t\n# " ..
                     srv.base .. "/ok/never\n" .. srv.base .. "/ok/c")
      local r = run({ "run", HTTP, "-v", srv.base .. "/ok/a", "--urls", path })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("ok /ok/a\nok /ok/b\nok /ok/c\n", r.stdout)
      local s = summaries(r.stderr)
      assert.are.equal(3, count(s))
      assert.matches("/ok/c: success", s[3])
    end)

    -- a Windows editor's list: CRLF was taken, its UTF-8 BOM made the
    -- first URL bad ("Port number was not a decimal number", the BOM unseen)
    it("--urls FILE starting with a UTF-8 byte order mark: the mark is skipped", function ()
      local path = tmp .. "/bom.txt"
      proc.writefile(path, "\xEF\xBB\xBF" .. srv.base .. "/ok/a\r\n" .. srv.base .. "/ok/b\r\n")
      local r = run({ "run", HTTP, "--urls", path })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("ok /ok/a\nok /ok/b\n", r.stdout)
    end)

    -- bodies reached standard output as their calls ended: a URL retried
    -- after two 503s came after those behind it (curl keeps list order)
    it("standard output gets the bodies in list order, a retried URL's first, with or without -Z", function ()
      local function file(n)
        local t = {}
        for i = 0, 100000 + n - 1 do t[#t + 1] = string.char((i + 17 * n) % 251) end
        return table.concat(t)
      end
      for _, z in ipairs({ {}, { "-Z" } }) do
        srv:reset()
        local log = tmp .. "/log.json"
        local r = run(concat({ "run", HTTP, "--log-json", log }, z, FAST,
                             { srv.base .. "/flaky/a", srv.base .. "/file/1", srv.base .. "/ok/2",
                               srv.base .. "/notfound/x", srv.base .. "/file/2", srv.base .. "/ok/3" }))
        assert.are.equal(1, r.code, r.stderr)
        local want = "body of /flaky/a\n" .. file(1) .. "ok /ok/2\nno such thing\n" .. file(2) .. "ok /ok/3\n"
        assert.are.equal(#want, #r.stdout)
        assert.is_true(want == r.stdout, "the bodies are out of order")
        -- the first URL's call ended last: its body waited for none, the others for it
        local last
        for _, line in ipairs(proc.lines(proc.readfile(log))) do
          local o = proc.json.decode(line)
          if o.index and o.verdict ~= "retry" then last = o.index end
        end
        assert.are.equal(1, last)
      end
      -- -f: a failed URL's answer is left out, the order kept
      srv:reset()
      local r = run(concat({ "run", HTTP, "-f" }, FAST, { srv.base .. "/flaky/b", srv.base .. "/notfound/y",
                                                         srv.base .. "/ok/4" }))
      assert.are.equal(1, r.code, r.stderr)
      assert.are.equal("body of /flaky/b\nok /ok/4\n", r.stdout)
    end)

    it("--output-dir names: the last segment, sanitized, unique with a numeric suffix", function ()
      local out = tmp .. "/out"
      proc.sh("mkdir " .. proc.q(out))
      local list = { "/ok/a.txt", "/ok/x/a.txt", "/ok/", "/ok/.hidden", "/ok/we%20ird%2Fname?q=1",
                     "/ok/a.txt" }
      for i, p in ipairs(list) do list[i] = srv.base .. p end
      local r = run(concat({ "run", HTTP, "--output-dir", out }, list))
      assert.are.equal(0, r.code, r.stderr)
      assert.are.same({ "_hidden", "a.txt", "a.txt.1", "a.txt.2", "index", "we_ird_name" },
                      proc.ls(out))
      assert.are.equal("ok /ok/x/a.txt\n", proc.readfile(out .. "/a.txt.1"))
    end)

    it("--output-dir names: a suffix a URL's own name holds is passed, each repeat taking the next", function ()
      local out = tmp .. "/out"
      proc.sh("mkdir " .. proc.q(out))
      local list = { "/ok/a", "/ok/a.2", "/ok/x/a", "/ok/y/a", "/ok/a.1", "/ok/z/a" }
      for i, p in ipairs(list) do list[i] = srv.base .. p end
      local r = run(concat({ "run", HTTP, "--output-dir", out }, list))
      assert.are.equal(0, r.code, r.stderr)
      assert.are.same({ "a", "a.1", "a.1.1", "a.2", "a.3", "a.4" }, proc.ls(out))
      assert.are.equal("ok /ok/x/a\n", proc.readfile(out .. "/a.1"))
      assert.are.equal("ok /ok/a.2\n", proc.readfile(out .. "/a.2"))
      assert.are.equal("ok /ok/y/a\n", proc.readfile(out .. "/a.3"))
      assert.are.equal("ok /ok/a.1\n", proc.readfile(out .. "/a.1.1"))
      assert.are.equal("ok /ok/z/a\n", proc.readfile(out .. "/a.4"))
    end)

    -- each repeat tried base, base.1, base.2 ... from 1: 24,000 URLs of
    -- one name took 23 s of CPU time to name; now 0.8 s, all of it the
    -- 24,000 calls to a closed port (2.5 s under the sanitizers); on a
    -- slower machine 2.2 s, and 6.5 s under the sanitizers, which an 8 s
    -- bound for both left too little room
    local cpu_bound = os.getenv("ASAN_OPTIONS") and 24 or 8
    it("--output-dir names: linear in the number of URLs of one name (24,000 within 8 s of CPU time, 24 s under the sanitizers)", function ()
      local out, list = tmp .. "/q", tmp .. "/s"
      proc.sh("mkdir " .. proc.q(out))
      -- a closed port: each call fails at once
      assert.are.equal(0, proc.sh("seq 1 24000 | sed 's|^|http://127.0.0.1:1/page/|; s|$|/|' > " ..
                                  proc.q(list)))
      local code = proc.sh("ulimit -t " .. cpu_bound .. "; " .. proc.q(proc.bin) .. " run -s --retry 0 --output-dir " ..
                           proc.q(out) .. " --urls " .. proc.q(list) .. " </dev/null")
      assert.are.equal(4, code)
    end)

    it("a URL judged final leaves no file; the others are kept", function ()
      local out = tmp .. "/out"
      proc.sh("mkdir " .. proc.q(out))
      local r = run(concat({ "run", HTTP, "--output-dir", out }, FAST,
                           { srv.base .. "/notfound/gone", srv.base .. "/ok/here" }))
      assert.are.equal(1, r.code, r.stderr)
      assert.are.same({ "here" }, proc.ls(out))
    end)

    it("--log-json: each line also names the URL and its number", function ()
      local file = tmp .. "/log.json"
      local list = { srv.base .. "/flaky/j", srv.base .. "/ok/j" }
      local r = run(concat({ "run", HTTP, "--log-json", file, "-q" }, FAST, list))
      assert.are.equal(0, r.code, r.stderr)
      local by_index = {}
      local lines = proc.lines(proc.readfile(file))
      -- the log ends with one summary object for the whole batch
      local summary = proc.json.decode(table.remove(lines))
      assert.is_true(summary.summary)
      assert.are.same({ 4, 0, "success" }, { summary.attempts, summary.exit, summary.verdict })
      for _, line in ipairs(lines) do
        local e = proc.json.decode(line)
        by_index[e.index] = (by_index[e.index] or 0) + 1
        assert.are.equal(list[e.index], e.url)
        assert.are.equal(list[e.index], e.target)
        assert.is_string(e.verdict)
      end
      assert.are.same({ 3, 1 }, by_index)
    end)

    -- each body was fetched, then lost ("success, ... exit 1" URL by URL)
    it("an --output-dir no file can be made in: a usage error naming it, nothing sent", function ()
      local dir = tmp .. "/ro"
      proc.sh("mkdir -m 500 " .. proc.q(dir))
      local p = io.popen("id -u")
      if p:read("l") == "0" then dir = "/proc" end -- root writes past a mode
      p:close()
      local r = run({ "run", HTTP, "--output-dir", dir, srv.base .. "/ok/a.txt", srv.base .. "/ok/b.txt" })
      assert.are.equal(2, r.code, r.stderr)
      assert.matches("^luaretry: run: %-%-output%-dir " .. dir:gsub("%p", "%%%0") .. ": cannot create files there", r.stderr)
      assert.are.equal(0, #srv:requests())
      assert.are.same({}, proc.leftovers(dir))
    end)

    -- a folder that cannot take the files: one line, no synopsis, though
    -- exit 2 is a usage error; /proc said "No such file or directory"; and
    -- the options named were not the ones given (-o for -O, --output-dir
    -- for -O of several URLs)
    it("a folder no file can be made in or none at all: a usage error with the synopsis, naming the options given", function ()
      local a, b = srv.base .. "/ok/a", srv.base .. "/ok/b"
      local cases = {
        { { "--output-dir", tmp .. "/none", a, b }, "run: %-%-output%-dir [^\n]*/none: No such file or directory" },
        { { "--output-dir", "/proc", a, b }, "run: %-%-output%-dir /proc: cannot create files there\n" },
        { { "-o", "/proc/x", a }, "run: %-o /proc/x: its folder /proc: cannot create files there\n" },
        { { "-O", "--output-dir", "/proc", a }, "run: %-O /proc/a: its folder /proc: cannot create files there\n" },
        { { "--remote-name", "--output-dir", "/proc", a }, "run: %-%-remote%-name /proc/a: its folder /proc: " },
        { { "-O", "--output-dir", "/proc", a, b }, "run: %-%-output%-dir /proc: cannot create files there\n" },
        { { "-O", a, b, cwd = "/proc" }, "run: %-O %.: cannot create files there\n" },
        { { "-O", a, cwd = "/proc" }, "run: %-O a: its folder %.: cannot create files there\n" },
      }
      for _, c in ipairs(cases) do
        local args = concat({ "run", HTTP }, c[1])
        local r
        if c[1].cwd then -- the current folder: the binary and policy by their whole paths
          local err = tmp .. "/err"
          local words = {}
          args[2] = proc.readfile_cmd("realpath " .. proc.q(HTTP)):gsub("\n$", "")
          for i, w in ipairs(args) do words[i] = proc.q(w) end
          local bin = proc.readfile_cmd("realpath " .. proc.q(proc.bin)):gsub("\n$", "")
          r = { code = proc.sh("cd " .. c[1].cwd .. " && " .. proc.q(bin) .. " " .. table.concat(words, " ") ..
                               " </dev/null >/dev/null 2>" .. proc.q(err)) }
          r.stderr = proc.readfile(err)
        else
          r = run(args)
        end
        assert.are.equal(2, r.code, r.stderr)
        assert.matches("^luaretry: " .. c[2], r.stderr)
        assert.matches("\nusage: luaretry run", r.stderr)
      end
      assert.are.equal(0, #srv:requests())
    end)

    -- it read as a list that failed, then as an empty one: two lines, the
    -- second wrong
    it("--urls naming a folder is refused as one, said once", function ()
      local r = run({ "run", HTTP, "--urls", tmp })
      assert.are.equal(2, r.code, r.stderr)
      assert.matches("^luaretry: %-%-urls " .. tmp:gsub("%p", "%%%0") .. ": Is a directory\n", r.stderr)
      assert.is_nil(r.stderr:find("holds no URL", 1, true), r.stderr)
    end)

    -- the line said "success, ... exit 1" and no more
    it("a body that cannot be written (a full disk): exit 1, the URL's line says why", function ()
      local err = tmp .. "/err"
      local code = proc.sh(proc.q(proc.bin) .. " run " .. proc.q(HTTP) .. " -q " ..
                           proc.q(srv.base .. "/ok/1") .. " " .. proc.q(srv.base .. "/ok/2") ..
                           " >/dev/full 2>" .. proc.q(err))
      local stderr = proc.readfile(err)
      assert.are.equal(1, code, stderr)
      local s = summaries(stderr)
      assert.are.equal(2, count(s), stderr)
      for i = 1, 2 do
        assert.matches(": success, 1 attempt, status 200, [%d.]+ s, exit 1: its body was not written$", s[i])
      end
      assert.matches("standard output: writing: No space left on device", stderr)
      -- one URL: the same status (luaretry(1), EXIT STATUS)
      code = proc.sh(proc.q(proc.bin) .. " run " .. proc.q(HTTP) .. " -q " ..
                     proc.q(srv.base .. "/ok/1") .. " >/dev/full 2>" .. proc.q(err))
      assert.are.equal(1, code, proc.readfile(err))
    end)

    -- curl pairs each -o with a URL; the refusal said "one URL takes one
    -- file" of two URLs
    it("-o for each of several URLs (curl's pairing) is refused, saying what to use", function ()
      local r = run({ "run", HTTP, srv.base .. "/ok/1", "-o", tmp .. "/o1", srv.base .. "/ok/2",
                      "-o", tmp .. "/o2" })
      assert.are.equal(2, r.code, r.stderr)
      assert.matches("^luaretry: run: %-o given twice: [^\n]*%-O or %-%-output%-dir DIR", r.stderr)
      assert.are.equal(0, #srv:requests())
    end)

    -- luaretry(1): -i, -D and -w take one URL (curl writes them per URL)
    it("-i, -D or -w with several URLs is a usage error before any request", function ()
      for _, opt in ipairs { { "-i" }, { "-D", tmp .. "/h" }, { "-w", "%{http_code}" } } do
        local args = { "run", HTTP, srv.base .. "/ok/1", srv.base .. "/ok/2" }
        for _, w in ipairs(opt) do args[#args + 1] = w end
        local r = run(args)
        assert.are.equal(2, r.code, r.stderr)
        assert.matches("^luaretry: run: %-i, %-D and %-w take one URL", r.stderr)
      end
      assert.are.equal(0, #srv:requests())
    end)

    -- the first list was dropped without a word
    it("--urls given twice is refused: one list, nothing sent", function ()
      local a, b = url_file({ srv.base .. "/ok/a" }), tmp .. "/b.txt"
      proc.writefile(b, srv.base .. "/ok/b\n")
      local r = run({ "run", HTTP, "--urls", a, "--urls", b })
      assert.are.equal(2, r.code, r.stderr)
      assert.matches("^luaretry: run: %-%-urls given twice", r.stderr)
      assert.are.equal(0, #srv:requests())
    end)

    -- -K - took standard input whole and --urls - found it empty, said
    -- nowhere; -T - was named "-d @-"
    it("two readers of standard input (--urls -, -K -, -T -, -d @-, -w @-): refused naming both", function ()
      local err = tmp .. "/err"
      for _, case in ipairs {
        { "-K -", "--urls - and -K - cannot both read standard input" },
        { "-T - " .. proc.q(srv.base .. "/ok/put"), "--urls - and -T - cannot both read standard input" },
        { "-w @-", "--urls - and -w @- cannot both read standard input" },
      } do
        local code = proc.sh("printf 'url = \"%s\"\\n' " .. proc.q(srv.base .. "/ok/k") .. " | " ..
                             proc.q(proc.bin) .. " run " .. proc.q(HTTP) .. " " .. case[1] ..
                             " --urls - >/dev/null 2>" .. proc.q(err))
        local stderr = proc.readfile(err)
        assert.are.equal(2, code, stderr)
        assert.matches("^luaretry: run: " .. case[2]:gsub("%p", "%%%0"), stderr)
      end
      -- one URL: -w @- took standard input, -d @- sent an empty body
      local code = proc.sh("echo data | " .. proc.q(proc.bin) .. " run " .. proc.q(HTTP) .. " -w @- -d @- " ..
                           proc.q(srv.base .. "/ok/w") .. " >/dev/null 2>" .. proc.q(err))
      assert.are.equal(2, code, proc.readfile(err))
      assert.matches("^luaretry: run: %-d @%- and %-w @%- cannot both read standard input", proc.readfile(err))
      assert.are.equal(0, #srv:requests())
    end)

    -- the list was truncated by the log before it was read ("holds no
    -- URL"), or replaced by the metrics after the run (exit 0)
    it("--urls FILE that an output names too (--log-json, --metrics-file): refused, the list intact", function ()
      local list = url_file({ srv.base .. "/ok/1", srv.base .. "/ok/2" })
      local before = proc.readfile(list)
      for _, opt in ipairs { "--log-json", "--metrics-file", "--trace-ascii" } do
        local r = run({ "run", HTTP, "--urls", list, opt, tmp .. "/./urls.txt" })
        assert.are.equal(2, r.code, r.stderr)
        assert.matches("^luaretry: run: %-%-urls and " .. opt:gsub("%p", "%%%0") .. " name the same file", r.stderr)
        assert.are.equal(before, proc.readfile(list))
      end
      assert.are.equal(0, #srv:requests())
    end)

    -- -O and --output-dir names were never checked against the other
    -- files: -c's jar replaced a body, a body replaced --log-json's log
    -- or the --urls list
    it("a URL's file in --output-dir that another option writes (-c, --log-json, --urls ...): refused, naming both", function ()
      local out = tmp .. "/out"
      proc.sh("mkdir " .. proc.q(out))
      local list = url_file({ srv.base .. "/ok/1", srv.base .. "/ok/urls.txt" })
      local before = proc.readfile(list)
      local cases = {
        { { "--output-dir", out, "-c", out .. "/b" }, "%-%-output%-dir [^ ]*/out/b %(URL %[2%]%) and %-c " },
        { { "--output-dir", out, "--log-json", out .. "/a" }, "%-%-output%-dir [^ ]*/out/a %(URL %[1%]%) and %-%-log%-json " },
        { { "--output-dir", out, "--metrics-file", out .. "/../out/a" }, "%-%-output%-dir [^ ]*/out/a [^\n]*and %-%-metrics%-file " },
        { { "--output-dir", out, "--trace-ascii", out .. "/b" }, "%-%-output%-dir [^ ]*/out/b [^\n]*and %-%-trace%-ascii " },
        -- a repeated name's suffix counts: /ok/a after /ok/x/a is a.1
        { { "--output-dir", out, "--log-json", out .. "/a.1", srv.base .. "/ok/x/a" },
          "%-%-output%-dir [^ ]*out/a%.1 %(URL %[2%]%) and %-%-log%-json" },
      }
      for _, c in ipairs(cases) do
        proc.writefile(out .. "/a", "A")
        proc.writefile(out .. "/b", "B")
        local r = run(concat({ "run", HTTP }, c[1], { srv.base .. "/ok/a", srv.base .. "/ok/b" }))
        assert.are.equal(2, r.code, r.stderr)
        assert.matches("^luaretry: run: " .. c[2] .. ".* name the same file: one would write over the other\n", r.stderr)
        assert.matches("usage: luaretry run", r.stderr)
        -- no body anywhere; -c's jar is not written, --log-json not opened
        -- (--metrics-file and --trace-ascii are written where they say)
        if c[1][3] == "-c" or c[1][3] == "--log-json" then
          assert.are.equal("A", proc.readfile(out .. "/a"))
          assert.are.equal("B", proc.readfile(out .. "/b"))
        end
        assert.are_not.equal("ok /ok/a\n", proc.readfile(out .. "/a"))
      end
      -- the list itself, from its own folder (-O's is the current one)
      local r = run({ "run", HTTP, "--output-dir", tmp, "--urls", list })
      assert.are.equal(2, r.code, r.stderr)
      assert.matches("^luaretry: run: %-%-output%-dir [^ ]*/urls%.txt %(URL %[2%]%) and %-%-urls ", r.stderr)
      assert.are.equal(before, proc.readfile(list))
      assert.are.equal(0, #srv:requests())
      -- from a pipe, the list is checked as it comes: that URL fails alone
      local err = tmp .. "/err"
      local code = proc.sh("cat " .. proc.q(list) .. " | " .. proc.q(proc.bin) .. " run " ..
                           proc.q(HTTP) .. " --output-dir " .. proc.q(out) .. " -c " ..
                           proc.q(out .. "/urls.txt") .. " --urls - 2>" .. proc.q(err))
      local stderr = proc.readfile(err)
      assert.are.equal(2, code, stderr)
      assert.matches("^luaretry: run: %-%-output%-dir [^ ]*/urls%.txt %(URL %[2%]%) and %-c [^\n]* name the same file", stderr)
      assert.is_nil(stderr:find("usage:", 1, true))
      assert.are.equal("ok /ok/1\n", proc.readfile(out .. "/1"))
      assert.are.equal(0, #srv:requests_on("/ok/urls.txt"))
    end)

    it("-O of one URL whose name another option writes (-c): refused, naming both; the jar as it was", function ()
      local jar = tmp .. "/a"
      proc.writefile(jar, "JAR")
      local r = run({ "run", HTTP, "-O", "--output-dir", tmp, "-c", jar, srv.base .. "/ok/a" })
      assert.are.equal(2, r.code, r.stderr)
      assert.matches("^luaretry: run: %-O and %-c name the same file", r.stderr)
      assert.are.equal("JAR", proc.readfile(jar))
      assert.are.equal(0, #srv:requests())
    end)

    it("usage errors exit 2 and send nothing", function ()
      local a, b = srv.base .. "/ok/1", srv.base .. "/ok/2"
      local cases = {
        { "run", HTTP, a, b, "-o", tmp .. "/out" },
        { "run", HTTP, a, b, "--parallel-max", "0" },
        { "run", HTTP, a, b, "--parallel-max", "1001" },
        { "run", HTTP, a, b, "--parallel-max", "x" },
        { "run", HTTP, a, "ftp://127.0.0.1/" },
        { "run", HTTP, "--urls", tmp .. "/missing" },
        { "run", HTTP, a, b, "--output-dir", tmp .. "/missing" },
        { "run", HTTP, "--output-dir", tmp, "-o", tmp .. "/x", a },
      }
      for _, args in ipairs(cases) do
        local r = run(args, { timeout = 10 })
        assert.are.equal(2, r.code, table.concat(args, " ") .. ": " .. r.stderr)
      end
      proc.writefile(tmp .. "/empty", "# nothing\n\n")
      local r = run({ "run", HTTP, "--urls", tmp .. "/empty" })
      assert.are.equal(2, r.code, r.stderr)
      assert.are.equal(0, #srv:requests())
    end)
  end)
end)
