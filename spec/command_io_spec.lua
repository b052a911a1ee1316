-- `luaretry run -- COMMAND` and the world around the command: the
-- terminal (lent to the attempt's process group when it reads it; Ctrl-C,
-- Ctrl-Z and the timeout leave the terminal luaretry's again) and
-- luaretry's own standard output and error (a full one never stops the
-- watch of the attempt's timeout; a reader that went away, or a write
-- error, stops the command and the run with exit 1).
local proc = require "support.proc"

local L = proc.q(proc.bin)

-- Runs a shell script (bash) under a KILL timeout, never under the
-- sanitizer runtime (the tools around luaretry are not built with it;
-- luaretry is linked with it when it is the sanitized build).
local function bash(script, seconds)
  return proc.sh("env -u LD_PRELOAD timeout -s KILL " .. (seconds or 40) .. " bash -c " ..
                 proc.q("export LC_ALL=C SHELL=/bin/sh; " .. script))
end

-- `cmdline` (sh) on a pseudo-terminal of its own (util-linux script(1)),
-- its session's controlling terminal, with luaretry in the foreground
-- group; `steps` type on the terminal: {after = TEXT, type = BYTES}, each
-- once TEXT is on the terminal (waited for up to 20 s: a busy machine's).  The writer stays
-- until END is on the terminal.  What the terminal showed, \r\n as \n.
local function on_terminal(dir, cmdline, steps)
  local out = proc.q(dir .. "/tty")
  local wait = function (text)
    return "for i in $(seq 1000); do grep -qF " .. proc.q(text) .. " " .. out ..
           " 2>/dev/null && break; sleep 0.02; done; "
  end
  local writer = ""
  for _, s in ipairs(steps) do
    writer = writer .. (s.after and wait(s.after) or "") .. "printf " .. proc.q(s.type) .. "; "
  end
  writer = writer .. wait("END")
  bash("{ " .. writer .. "} | script -qfec " .. proc.q(cmdline) .. " /dev/null > " .. out, 60)
  return (proc.readfile(dir .. "/tty") or ""):gsub("\r\n", "\n")
end

describe("run -- COMMAND and the terminal", function ()
  local tmp
  before_each(function () tmp = proc.tmpdir() end)
  after_each(function () proc.rmtree(tmp) end)

  if os.execute("command -v script >/dev/null 2>&1") ~= true then
    it("needs script(1), util-linux's", function () pending("no script(1)") end)
    return
  end

  it("a command that reads the terminal gets it, a grandchild too, and what is typed", function ()
    local tty = on_terminal(tmp, L .. " run --set attempt_timeout=5 --set max_attempts=1 -- sh -c " ..
                            proc.q("echo READY >&2; read x; echo got $x >&2; sh -c 'read y; echo got $y'") ..
                            "; echo rc=$? END", { { after = "READY", type = "hello\n" },
                                                  { after = "got hello", type = "again\n" } })
    -- not stopped (SIGTTIN) in a group that is not the terminal's until
    -- its timeout: `timeout --foreground` shows the same
    assert.matches("got hello\n.*got again\n.*rc=0 END", tty)
  end)

  it("Ctrl-C while the command has it: the run is interrupted (130), the terminal luaretry's again", function ()
    -- `stty echo` sets the terminal's modes: the group has it from then on
    local tty = on_terminal(tmp, L .. " run --set attempt_timeout=20 -- sh -c " ..
                            proc.q("stty echo; echo READY >&2; sleep 25") ..
                            "; echo rc=$?; read y; echo y=$y END",
                            { { after = "READY", type = "\3" }, { after = "rc=", type = "after\n" } })
    assert.matches("READY\n", tty)
    assert.matches("exit 130 %-> cancelled", tty)
    assert.matches("luaretry: interrupted\nrc=130\n", tty)
    -- the shell's read gets the line: the terminal is its group's again
    assert.matches("y=after END", tty)
  end)

  it("an attempt stopped at its timeout gives the terminal back, with its modes", function ()
    local tty = on_terminal(tmp, L .. " run --set attempt_timeout=1 --set max_attempts=1 -- sh -c " ..
                            proc.q("stty -echo; echo READY >&2; read x") ..
                            "; echo rc=$?; stty -a | grep -o ' -*echo '; echo ASK; read y; echo y=$y END",
                            { { after = "ASK", type = "after\n" } })
    assert.matches("READY\n", tty)
    assert.matches("timeout error %-> exhausted", tty)
    -- not -echo: the prompt's modes were put back.  The line is typed
    -- once they are shown (ASK): typed earlier, the terminal's echo of it
    -- came between rc=4 and them on a busy machine
    assert.matches("rc=4\n echo \nASK\n", tty)
    assert.matches("y=after END", tty)
  end)

  it("Ctrl-Z stops luaretry's job with the command's; fg continues it, with the terminal", function ()
    -- bash -m: a job-control shell, luaretry a job of its own
    local tty = on_terminal(tmp, "bash -mc " .. proc.q(L .. " run --set attempt_timeout=20 -- sh -c " ..
                            proc.q("stty echo; echo READY >&2; read x; echo got $x") ..
                            "; echo stopped=$?; fg >/dev/null; echo rc=$? END"),
                            { { after = "READY", type = "\26" }, { after = "stopped=", type = "hello\n" } })
    assert.matches("Stopped", tty)
    assert.matches("stopped=148\n", tty)  -- 128 + SIGTSTP: the shell saw its job stop
    assert.matches("got hello\nrc=0 END", tty)
  end)

  it("after Ctrl-Z, bg continues the command in the background", function ()
    -- the command waits for `go`, made once its job stopped: a Ctrl-Z
    -- typed late on a busy machine still finds it running.  bash, not
    -- sh: dash starts `sleep` with vfork, and a Ctrl-Z that stops the
    -- child before its exec leaves dash in the vfork, never stopped, so
    -- no stop reaches luaretry (nor any shell waiting on dash): 4 runs
    -- in 90 hung so beside two busy loops, 0 in 120 with bash
    local go = proc.q(tmp .. "/go")
    local tty = on_terminal(tmp, "bash -mc " .. proc.q(L .. " run -- bash -c " ..
                            proc.q("stty echo; echo READY >&2; for i in $(seq 1000); do [ -e " .. go ..
                                   " ] && break; sleep 0.05; done; echo done >&2") ..
                            "; echo stopped=$?; touch " .. go .. "; bg >/dev/null; wait; echo rc=$? END"),
                            { { after = "READY", type = "\26" } })
    assert.matches("stopped=148\n", tty)
    assert.matches("done\n.*rc=0 END", tty)
  end)

  it("a pager beside luaretry keeps the terminal while the command does not read it", function ()
    local tty = on_terminal(tmp, L .. " run --stdout=live -- sh -c 'echo one; sleep 1; echo two'" ..
                            " | sh -c 'read k </dev/tty; echo k=$k; cat'; echo END",
                            { { type = "key\n" } })
    assert.matches("k=key\n", tty)
    assert.matches("one\n.*two\n", tty)
  end)
end)

describe("run -- COMMAND and luaretry's own output", function ()
  local tmp
  before_each(function () tmp = proc.tmpdir() end)
  after_each(function () proc.rmtree(tmp) end)

  -- `luaretry ARGS` with its standard output (and, with `both`, its error
  -- output) into a pipe whose reader reads nothing and leaves once
  -- luaretry ended (20 s at most); luaretry's exit status and its own time.
  local function unread(args, both)
    local f = function (name) return proc.q(tmp .. "/" .. name) end
    bash("{ t0=$EPOCHREALTIME; " .. L .. " " .. args .. (both and "" or " 2>" .. f("err")) ..
         "; echo \"$? $t0 $EPOCHREALTIME\" > " .. f("end") .. "; } " .. (both and "2>&1 " or "") ..
         "| { for i in $(seq 400); do [ -e " .. f("end") .. " ] && break; sleep 0.05; done; }")
    local code, t0, t1 = (proc.readfile(tmp .. "/end") or ""):match("^(%d+) ([%d.]+) ([%d.]+)")
    return tonumber(code), t1 and tonumber(t1) - tonumber(t0)
  end

  local function attempts(log)
    local t = {}
    for _, line in ipairs(proc.lines(proc.readfile(log) or "")) do
      local o = proc.json.decode(line)
      if o.attempt then t[#t + 1] = o end
    end
    return t
  end

  it("a full standard error never holds the attempt past its timeout, nor the run past its deadline", function ()
    local log = tmp .. "/log.json"
    -- -s: luaretry's own lines would wait on the same full pipe
    local code, secs = unread("run -s --log-json " .. proc.q(log) ..
                              " --set attempt_timeout=1 --set deadline=3 -- sh -c 'yes >&2'", true)
    assert.are.equal(5, code)
    assert.is_true(secs < 3 + 5, "took " .. tostring(secs) .. " s")  -- the reader stays 20 s
    local a = attempts(log)
    assert.are.equal("timeout", a[1].error)
    -- stopped at its timeout (1 s), not once the reader left (15 s and
    -- more before); the margin is a busy machine's
    assert.is_true(a[1].elapsed < 1 + 3, "attempt 1 decided at " .. a[1].elapsed .. " s")
  end)

  it("--stdout=live: a full standard output neither; what it held is dropped, and said", function ()
    local log = tmp .. "/log.json"
    local code, secs = unread("run --stdout=live --log-json " .. proc.q(log) ..
                              " --set attempt_timeout=1 --set deadline=3 -- yes")
    assert.are.equal(5, code, proc.readfile(tmp .. "/err"))
    assert.is_true(secs < 3 + 5, "took " .. tostring(secs) .. " s")
    local a = attempts(log)
    assert.is_true(a[1].elapsed < 1 + 3, "attempt 1 decided at " .. a[1].elapsed .. " s")
    assert.matches("bytes of its output not written %(standard output full%)", a[1].error_detail)
    -- retry, or deadline when the backoff's jitter (up to 1 s) takes the
    -- next start past 3 s (final110): the line says what was dropped
    assert.matches("attempt 1/5: timeout error %-> %a+ .*bytes of its output not written",
                   proc.readfile(tmp .. "/err"))
  end)

  it("a slow reader gets all of it, in order, standard output and error", function ()
    local out, err = tmp .. "/out", tmp .. "/err"
    local slow = function (file) return " | { sleep 1; cat > " .. proc.q(file) .. "; }" end
    assert.are.equal(0, bash(L .. " run -q --stdout=live -- seq 1 200000" .. slow(out) .. "; " ..
                             L .. " run -q -- sh -c 'seq 1 200000 >&2' 2>&1" .. slow(err)))
    local want = {}
    for i = 1, 200000 do want[i] = i end
    want = table.concat(want, "\n") .. "\n"
    assert.are.equal(want, proc.readfile(out))
    assert.are.equal(want, proc.readfile(err))
  end)

  it("--stdout=live: a reader that goes away stops the command as SIGPIPE would: no retry, exit 1", function ()
    local log = tmp .. "/log.json"
    local f = function (name) return proc.q(tmp .. "/" .. name) end
    bash("{ t0=$EPOCHREALTIME; " .. L .. " run --stdout=live --log-json " .. proc.q(log) ..
         " --set deadline=30 -- yes 2>" .. f("err") .. "; echo \"$? $t0 $EPOCHREALTIME\" > " ..
         f("end") .. "; } | head -1 > " .. f("out"))
    local code, t0, t1 = proc.readfile(tmp .. "/end"):match("^(%d+) ([%d.]+) ([%d.]+)")
    assert.are.equal("y\n", proc.readfile(tmp .. "/out"))
    assert.are.equal(1, tonumber(code))
    -- at once, not at the deadline (30 s) after reading yes for nothing;
    -- the margin is a busy machine's
    assert.is_true(t1 - t0 < 30 - 10, "took " .. (t1 - t0) .. " s")
    assert.are.equal("luaretry: standard output: writing: Broken pipe\n", proc.readfile(tmp .. "/err"))
    local a = attempts(log)
    assert.are.equal(1, #a)
    assert.are.equal("gave_up", a[1].verdict)
  end)

  it("--stdout=live: a full disk or a closed standard output is exit 1, said once, as by default", function ()
    for _, case in ipairs { { "> /dev/full", "No space left on device" }, { ">&-", "Bad file descriptor" } } do
      for _, mode in ipairs { "--stdout=live", "--stdout=final" } do
        local err = tmp .. "/err"
        local code = bash(L .. " run -q " .. mode .. " -- seq 1 100000 2>" .. proc.q(err) .. " " .. case[1])
        assert.are.equal(1, code, mode .. " " .. case[1])
        assert.are.equal("luaretry: standard output: writing: " .. case[2] .. "\n", proc.readfile(err))
      end
    end
  end)
end)
