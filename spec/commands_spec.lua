-- `luaretry run POLICY -- COMMAND` runs each attempt as GNU timeout runs a
-- command: its own process group, SIGTERM then SIGKILL after a short grace
-- at the timeout, the deadline or a cancel (at once on a second SIGINT),
-- the attempt over when the group is gone; standard input spooled once and
-- given whole to every attempt; 126 and 127 final; the error output shown;
-- no descriptor of luaretry's in the command.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
local proc = require "support.proc"

local root = proc.root
local HTTP = root .. "/policies/http.lua"
local CMD = here .. "/fixtures/run/cmd.lua"

-- A marker only this test's processes carry: "sleep 40.NNNN" with NNNN
-- from the PID and a counter, so that pgrep finds them and nothing else.
local serial = 0
local function marker(seconds)
  serial = serial + 1
  return ("%d.%04d%03d"):format(seconds, tonumber(proc.readfile("/proc/self/stat"):match("^%d+")) % 10000,
                                serial)
end
-- The regex for "sleep N" that does not match the shell running pgrep.
local function sleeping(n) return "slee[p] " .. n:gsub("%.", "\\.") end

-- Runs luaretry with `stdin` (a shell command) piped in; the wrapper
-- records luaretry's own exit status and time.
local function run_piped(stdin, args, dir)
  local words = {}
  for _, a in ipairs(args) do words[#words + 1] = proc.q(a) end
  local f = function (name) return proc.q(dir .. "/" .. name) end
  local script = "export LC_ALL=C; " .. stdin .. " | { t0=$EPOCHREALTIME; " .. proc.q(proc.bin) ..
    " " .. table.concat(words, " ") .. " >" .. f("out") .. " 2>" .. f("err") ..
    "; echo \"$? $t0 $EPOCHREALTIME\" > " .. f("end") .. "; }"
  proc.sh("timeout -s KILL 30 bash -c " .. proc.q(script))
  local code, t0, t1 = (proc.readfile(dir .. "/end") or ""):match("^(%d+) ([%d.]+) ([%d.]+)")
  return { code = tonumber(code), secs = t1 and (tonumber(t1) - tonumber(t0)),
           stdout = proc.readfile(dir .. "/out"), stderr = proc.readfile(dir .. "/err") }
end

describe("run -- COMMAND", function ()
  local tmp
  before_each(function () tmp = proc.tmpdir() end)
  after_each(function () proc.rmtree(tmp) end)

  describe("process groups", function ()
    it("--set deadline=3 -- sh -c 'sleep 40 & sleep 41': exit 5 at the deadline, nothing left", function ()
      local a, b = marker(40), marker(41)
      local r = proc.run({ "run", HTTP, "--set", "deadline=3", "--", "sh", "-c",
                           "sleep " .. a .. " & sleep " .. b }, { timeout = 20 })
      assert.are.equal(5, r.code, r.stderr)
      -- the deadline, with a margin for a busy machine's start-up and
      -- exit: the sleeps (40 s) would hold it past the run's 20 s limit
      assert.is_true(r.secs < 3 + 5, "took " .. r.secs .. " s")
      assert.are.same({}, proc.pids(sleeping(a)))
      assert.are.same({}, proc.pids(sleeping(b)))
    end)

    it("a background grandchild holding the pipes neither stretches the run nor outlives it", function ()
      local m = marker(12)
      local r = proc.run({ "run", HTTP, "--set", "deadline=2", "--", "sh", "-c",
                           "sleep " .. m .. " & echo started" }, { timeout = 20 })
      -- the group outlived the command's own process: the attempt timed
      -- out, which is never a success
      assert.are.equal(5, r.code, r.stderr)
      -- the deadline, with a margin for a busy machine: the grandchild
      -- (12 s) would stretch it further
      assert.is_true(r.secs < 2 + 5, "took " .. r.secs .. " s")
      assert.matches("attempt 1/10: timeout error %-> deadline", r.stderr)
      assert.are.same({}, proc.pids(sleeping(m)))
    end)

    it("attempt_timeout=1, deadline=4: each attempt ends at its timeout, the run at the deadline", function ()
      local m = marker(30)
      local r = proc.run({ "run", CMD, "--set", "attempt_timeout=1", "--set", "deadline=4",
                           "--set", "max_attempts=10", "--", "sh", "-c",
                           "sleep " .. m .. " & sleep " .. m }, { timeout = 20 })
      assert.are.equal(5, r.code, r.stderr)
      assert.is_true(r.secs < 4 + 5, "took " .. r.secs .. " s")  -- the sleeps: 30 s
      assert.is_true(r.secs > 3.5, "took only " .. r.secs .. " s")
      -- two timeouts retried; the third retried too, or (on a machine
      -- so busy that each attempt's group took 0.3 s more to go) the last
      assert.matches("attempt 2/10: timeout error %-> retry", r.stderr)
      assert.matches("attempt 3/10: timeout error %-> ", r.stderr)
      assert.are.same({}, proc.pids(sleeping(m)))
    end)

    it("a command that ignores SIGTERM gets SIGKILL after a grace of 1 s", function ()
      local m = marker(30)
      local log = tmp .. "/log.json"
      local r = proc.run({ "run", CMD, "--set", "attempt_timeout=1", "--set", "max_attempts=1",
                           "--log-json", log, "--", "sh", "-c", "trap '' TERM; sleep " .. m .. "; true" },
                         { timeout = 20 })
      assert.are.equal(4, r.code, r.stderr)
      -- the attempt over when the group is gone: the timeout (1 s) and the
      -- grace (1 s), on the engine's own clock from the call's start (a
      -- busy machine's start-up is not in it; a late wake-up may add to it)
      local attempt = proc.json.decode(proc.lines(proc.readfile(log))[1])
      assert.is_true(attempt.elapsed >= 1.9 and attempt.elapsed < 2 + 1, "decided at " .. attempt.elapsed .. " s")
      assert.are.same({}, proc.pids(sleeping(m)))
    end)

    it("SIGINT stops a waiting command's whole group within 0.3 s: exit 130", function ()
      local m = marker(20)
      -- the file says the command runs (pgrep's "sleep M" also matches
      -- luaretry's own command line, before it caught SIGINT)
      local up = tmp .. "/up"
      local job = proc.spawn({ "run", CMD, "--", "sh", "-c", "touch " .. proc.q(up) .. "; sleep " .. m .. "; true" },
                             tmp)
      finally(function () job:stop() end)
      assert.truthy(proc.wait_for(function () return proc.readfile(up) and #proc.pids(sleeping(m)) > 0 end, 5))
      local sent = job:signal("INT")
      local code, ended = job:wait(5)
      assert.are.equal(130, code)
      -- before the grace (1 s) would kill a command that ignored SIGTERM
      assert.is_true(ended - sent < 0.9, ("exited %.3f s after the signal"):format(ended - sent))
      assert.are.same({}, proc.pids(sleeping(m)))
      assert.matches("interrupted", job:stderr())
    end)

    it("a second SIGINT kills a group that ignores SIGTERM at once", function ()
      local m = marker(30)
      -- the file says the trap is set (pgrep's "sleep M" also matches
      -- luaretry's and the shell's own command lines, before either is ready)
      local up = tmp .. "/trapped"
      local job = proc.spawn({ "run", CMD, "--", "sh", "-c", "trap '' TERM INT; touch " .. proc.q(up) ..
                               "; sleep " .. m .. "; true" }, tmp)
      finally(function () job:stop() end)
      assert.truthy(proc.wait_for(function () return proc.readfile(up) and #proc.pids(sleeping(m)) > 0 end, 5))
      local first = job:signal("INT")
      proc.sleep(0.1)
      assert.is_true(proc.alive(job.pid), "the grace is not over yet")
      local sent = job:signal("INT")
      local code, ended = job:wait(5)
      assert.are.equal(130, code)
      -- before the grace (1 s from the first signal) would have ended it
      assert.is_true(ended - first < 0.95, ("exited %.3f s after the first signal, %.3f s after the second")
                                              :format(ended - first, ended - sent))
      assert.are.same({}, proc.pids(sleeping(m)))
    end)
  end)

  describe("standard input", function ()
    it("is spooled once and given whole to every attempt", function ()
      local seen = tmp .. "/seen"
      local r = run_piped("printf 'one\\ntwo\\n'", { "run", CMD, "--", "sh", "-c",
                                                     "cat >> " .. proc.q(seen) .. "; exit 3" }, tmp)
      assert.are.equal(4, r.code, r.stderr)
      assert.are.equal(("one\ntwo\n"):rep(3), proc.readfile(seen))
    end)

    -- luaretry(1)'s advice for a loop that reads its list from standard input
    it("in a while-read loop is taken by the first run, unless each gets < /dev/null", function ()
      local seen = tmp .. "/seen"
      local loop = "printf 'a\\nb\\nc\\n' > " .. proc.q(tmp .. "/list") ..
        "; while read x; do " .. proc.q(proc.bin) .. " run " .. proc.q(CMD) ..
        " -s -- sh -c 'echo \"$1\" >> \"$2\"' sh \"$x\" " .. proc.q(seen) .. " %s; done < " ..
        proc.q(tmp .. "/list")
      proc.sh("timeout -s KILL 30 bash -c " .. proc.q(loop:format("")))
      assert.are.equal("a\n", proc.readfile(seen))
      os.remove(seen)
      proc.sh("timeout -s KILL 30 bash -c " .. proc.q(loop:format("< /dev/null")))
      assert.are.equal("a\nb\nc\n", proc.readfile(seen))
    end)

    it("that does not end is bounded by the deadline: exit 5", function ()
      -- a writer that goes on for 20 s at least (a byte every 0.1 s), and
      -- stops at the first write after luaretry closed the pipe
      local writer = "for i in $(seq 200); do printf x || exit; sleep 0.1; done"
      local r = run_piped(writer, { "run", CMD, "--set", "deadline=1", "--", "cat" }, tmp)
      assert.are.equal(5, r.code, r.stderr)
      -- ended by the deadline (1 s), not by the input's end (20 s on): the
      -- margin is for a busy machine's start-up
      assert.is_true(r.secs < 1 + 9, "took " .. r.secs .. " s")
      assert.matches("standard input did not end before the deadline %(1 s%)", r.stderr)
    end)
  end)

  describe("126 and 127", function ()
    local noexec
    before_each(function ()
      noexec = tmp .. "/noexec.sh"
      proc.writefile(noexec, "#!/bin/sh\nexit 0\n")
    end)

    local policies = { CMD }
    for _, name in ipairs { "command", "azure-batch", "azure-interactive", "azure", "gcs", "http", "iam",
                            "memorystore" } do
      policies[#policies + 1] = root .. "/policies/" .. name .. ".lua"
    end
    for _, policy in ipairs(policies) do
      it("are final under " .. policy:match("[^/]*/[^/]*$"), function ()
        for _, case in ipairs { { tmp .. "/missing", 127 }, { noexec, 126 } } do
          local r = proc.run({ "run", policy, "--", case[1] }, { timeout = 20 })
          assert.are.equal(1, r.code, r.stderr)
          assert.matches("attempt 1[/%d]*: exit " .. case[2] .. " %-> final", r.stderr)
          assert.matches("cannot run", r.stderr)  -- the command's own error output
        end
      end)
    end

    it("names a command whose name holds an ESC or a newline with them escaped", function ()
      local r = proc.run({ "run", CMD, "-s", "--", "bad\27[31mname\nx" }, { timeout = 20 })
      assert.are.equal(1, r.code, r.stderr)
      assert.are.equal("luaretry: cannot run bad\\x1b[31mname\\x0ax: command not found\n", r.stderr)
    end)
  end)

  describe("error output", function ()
    local script = "echo \"err $((n=$(cat count 2>/dev/null || echo 0)+1))\" >&2; echo $n > count; exit 3"

    it("every attempt's passes through as written, its lines never split by luaretry's", function ()
      local r = proc.run({ "run", CMD, "--", "sh", "-c",
                           "cd " .. proc.q(tmp) .. "; printf 'bad\\033[2J\\n' >&2; printf 'no end' >&2; " .. script },
                         { timeout = 20 })
      assert.are.equal(4, r.code, r.stderr)
      -- the command's bytes as it wrote them (it is your command, not a
      -- server); a partial last line is ended before luaretry's next line
      for i = 1, 3 do
        assert.truthy(r.stderr:find("bad\27[2J\nno enderr " .. i .. "\nluaretry: attempt " .. i .. "/3: exit 3 -> ", 1, true),
                      r.stderr)
      end
    end)

    it("a success's too, and with -q and -s", function ()
      for _, flag in ipairs { "-v", "-q", "-s" } do
        local r = proc.run({ "run", CMD, flag, "--", "sh", "-c", "echo noise >&2; exit 0" }, { timeout = 20 })
        assert.are.equal(0, r.code)
        assert.matches("^noise\n", r.stderr, flag)
      end
    end)

    it("reaches luaretry's standard error while the attempt still runs", function ()
      local go = tmp .. "/go"
      local job = proc.spawn({ "run", CMD, "--", "sh", "-c",
                               "echo started >&2; while [ ! -e " .. proc.q(go) .. " ]; do sleep 0.05; done" }, tmp)
      finally(function () job:stop() end)
      assert.truthy(proc.wait_for(function () return (job:stderr() or ""):find("started\n", 1, true) end, 10),
                    "the line came only at the end")
      assert.is_true(proc.alive(job.pid))
      proc.writefile(go, "")
      assert.are.equal(0, job:wait(10))
    end)
  end)

  describe("standard output", function ()
    local script = "n=$(($(cat count 2>/dev/null || echo 0)+1)); echo $n > count; echo \"out $n\"; [ $n -ge 3 ]"

    it("only the final attempt's, by default (a pipe never gets it twice)", function ()
      local r = proc.run({ "run", CMD, "--", "sh", "-c", "cd " .. proc.q(tmp) .. "; " .. script }, { timeout = 20 })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("out 3\n", r.stdout)
    end)

    it("every attempt's as it comes with --stdout=live; --stdout=final is the default", function ()
      local r = proc.run({ "run", CMD, "--stdout=live", "--", "sh", "-c", "cd " .. proc.q(tmp) .. "; " .. script },
                         { timeout = 20 })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("out 1\nout 2\nout 3\n", r.stdout)
      os.remove(tmp .. "/count")
      r = proc.run({ "run", CMD, "--stdout=live", "--stdout=final", "--", "sh", "-c",
                     "cd " .. proc.q(tmp) .. "; " .. script }, { timeout = 20 })
      assert.are.equal("out 3\n", r.stdout)
    end)

    it("--stdout=live with a URL is a usage error", function ()
      local r = proc.run({ "run", "http", "--stdout=live", "http://127.0.0.1:9/" }, { timeout = 20 })
      assert.are.equal(2, r.code)
      assert.matches("^luaretry: run: %-%-stdout=live is for %-%- COMMAND", r.stderr)
    end)
  end)

  describe("without POLICY", function ()
    local fast = { "--set", "backoff.initial=0.01", "--set", "backoff.jitter=none" }
    local function run(args)
      local t = {}
      for _, w in ipairs(args) do t[#t + 1] = w end
      return proc.run(t, { timeout = 30 })
    end

    it("run -- COMMAND uses the shipped command policy: a failure is retried, 5 attempts", function ()
      local r = run { "run", fast[1], fast[2], fast[3], fast[4], "--", "sh", "-c", "exit 3" }
      assert.are.equal(4, r.code, r.stderr)
      assert.matches("attempt 1/5: exit 3 %-> retry in 0%.010 s %(backoff; [^)]*policies/command%.lua:%d+%)", r.stderr)
      assert.matches("attempt 5/5: exit 3 %-> exhausted", r.stderr)
      assert.is_nil(r.stderr:find("warning", 1, true))
    end)

    it("--set options.final_exit_codes makes a status final; 126 and 127 are final at once", function ()
      local r = run { "run", "--set", "options.final_exit_codes=3", "--", "sh", "-c", "exit 3" }
      assert.are.equal(1, r.code, r.stderr)
      assert.matches("attempt 1/5: exit 3 %-> final", r.stderr)
      r = run { "run", "--", "no-such-command-" .. serial }
      assert.are.equal(1, r.code, r.stderr)
      assert.matches("^luaretry: cannot run no%-such%-command%-%d+: command not found\nluaretry: attempt 1/5: exit 127 %-> final", r.stderr)
    end)

    it("a command killed by SIGINT or SIGTERM is not run again", function ()
      for _, sig in ipairs { "INT", "TERM" } do
        local r = run { "run", "--", "sh", "-c", "kill -" .. sig .. " $$" }
        assert.are.equal(1, r.code, r.stderr)
        assert.matches("attempt 1/5: exit 1[34][03] %-> final", r.stderr)
      end
    end)

    it("run http -- COMMAND warns, in one line, that http never retries it, and names command", function ()
      local r = run { "run", "http", "--", "sh", "-c", "exit 3" }
      assert.are.equal(1, r.code, r.stderr)
      local warnings = {}
      for line in r.stderr:gmatch("[^\n]+") do
        if line:find("warning", 1, true) then warnings[#warnings + 1] = line end
      end
      assert.are.equal(1, #warnings, r.stderr)
      assert.matches("^luaretry: warning: policy http never retries a command .*`command`", warnings[1])
      -- the probe counted nowhere: the run's own counters hold its one call
      r = run { "run", "http", "-q", "--stats", "--", "true" }
      assert.are.equal(0, r.code, r.stderr)
      assert.matches("calls 1, attempts 1,", r.stderr)
      assert.is_nil(r.stderr:find("warning", 1, true))
      -- a policy that retries a command is not warned about
      r = run { "run", CMD, "--", "true" }
      assert.is_nil(r.stderr:find("warning", 1, true))
    end)

    it("run URL (a word with :// where POLICY goes) uses http", function ()
      local srv = proc.server(root .. "/policies/faults/always-503.lua")
      finally(function () srv:stop() end)
      local r = run { "run", srv.base .. "/x", "--set", "max_attempts=2", fast[1], fast[2], fast[3], fast[4] }
      assert.are.equal(4, r.code, r.stderr)
      assert.matches("attempt 1/2: 503 %-> retry in 0%.010 s %(backoff; [^)]*policies/http%.lua:%d+%)", r.stderr)
      assert.is_nil(r.stderr:find("no such file", 1, true))
      -- every later word is a URL too: a batch, never a policy named after one
      r = run { "run", srv.base .. "/a", "-q", "--set", "max_attempts=1", srv.base .. "/b", "127.0.0.1:1",
                "--output-dir", tmp }
      assert.are.equal(4, r.code, r.stderr)
      assert.matches("%[1%] http://[^ ]*/a: exhausted", r.stderr)
      assert.matches("%[2%] http://[^ ]*/b: exhausted", r.stderr)
      assert.matches("%[3%] http://127%.0%.0%.1:1/: exhausted, 1 attempt, status connect error", r.stderr)
      r = run { "run", "https://127.0.0.1:1/x", "--set", "max_attempts=1" }
      assert.are.equal(4, r.code, r.stderr)
      assert.is_nil(r.stderr:find("no such file", 1, true))
      assert.matches("attempt 1/1: connect error", r.stderr)
    end)
  end)

  it("no descriptor of luaretry's reaches the command, --log-json FILE included", function ()
    local r = proc.run({ "run", CMD, "--log-json", tmp .. "/log.json", "--", "sh", "-c",
                         "ls /proc/$$/fd" }, { timeout = 20 })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("0\n1\n2\n", r.stdout)
  end)
end)
