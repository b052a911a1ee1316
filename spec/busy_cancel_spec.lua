-- A stop signal (SIGINT, SIGTERM) cancels the call, and the cancel stops a
-- hook of the policy that is busy for it (a loop, the pattern matcher) at
-- once, as it ends a wait: the run exits 130, not when the hook's
-- time_limit stops the script.
local proc = require "support.proc"

local BUSY = proc.root .. "/spec/fixtures/busy/"
local SERVER = proc.root .. "/spec/fixtures/run/server.lua"

-- The hooks' time limit: the watchdog would stop them at four fifths of
-- it (24 s).  A cancel takes a tick of the watchdog (5 ms) and the exit;
-- the bound leaves a busy machine (two cores shared, ASan) room for the
-- rest, and is far below the limit.
local TIME_LIMIT = 30
local BOUND = 6

describe("a stop signal while a hook is busy", function ()
  local srv, tmp
  proc.with_server(SERVER, function (s, t) srv, tmp = s, t end)

  -- Starts `luaretry run POLICY ARGS...` (-v: the script's print shows),
  -- waits until the hook printed (it is in its loop from then on), sends
  -- `sig`; the exit status, the seconds from the signal to the exit, and
  -- the error output.
  local function signal_busy(policy, args, sig)
    local job = proc.spawn(proc.concat({ "run", "-v", "--set", "time_limit=" .. TIME_LIMIT,
                                         BUSY .. policy }, args), tmp)
    finally(function () job:stop() end)
    assert.truthy(proc.wait_for(function () return (job:stderr() or ""):find("script: busy", 1, true) end,
                                30), "the hook never got busy: " .. (job:stderr() or ""))
    local sent = job:signal(sig)
    local code, ended = job:wait(TIME_LIMIT + 10)
    assert.truthy(code, "the run did not end")
    return code, ended - sent, job:stderr()
  end

  it("SIGINT stops is_transient busy in a loop: exit 130", function ()
    local code, secs, err = signal_busy("transient_loop.lua", { srv.base .. "/always503" }, "INT")
    assert.are.equal(130, code, err)
    assert.is_true(secs < BOUND, ("exited %.3f s after the signal"):format(secs))
    assert.matches("is_transient: [^\n]*transient_loop%.lua:9: stopped: the call was cancelled", err)
    assert.is_nil(err:find("time limit", 1, true), err)
    assert.matches("luaretry: interrupted\n", err, 1, true)
  end)

  it("SIGTERM stops is_transient busy in the pattern matcher: exit 130", function ()
    local code, secs, err = signal_busy("transient_pattern.lua", { srv.base .. "/always503" }, "TERM")
    assert.are.equal(130, code, err)
    assert.is_true(secs < BOUND, ("exited %.3f s after the signal"):format(secs))
    assert.matches("transient_pattern%.lua:10: stopped: the call was cancelled", err)
    assert.is_nil(err:find("time limit", 1, true), err)
  end)

  -- run() is called within luaretry_call_run's operation, and watches
  -- that call's cancel as the hooks watch theirs.
  it("SIGINT stops a workflow's run() busy in a loop: exit 130", function ()
    local code, secs, err = signal_busy("run_loop.lua", { srv.base .. "/new" }, "INT")
    assert.are.equal(130, code, err)
    assert.is_true(secs < BOUND, ("exited %.3f s after the signal"):format(secs))
    assert.is_nil(err:find("time limit", 1, true), err)
  end)
end)
