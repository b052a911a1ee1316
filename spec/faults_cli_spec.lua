-- `luaretry faults`: on loopback unless --listen-any (and then it says so
-- on every start); the first SIGINT stops it cleanly, a second ends it whatever its script does.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
local proc = require "support.proc"
local lfs = require "lfs"

local SCRIPT = here .. "/fixtures/faults/basic.lua"

-- Starts `luaretry faults ARGS...` in the background, its files in a
-- folder of its own under dir; the job and the address it listens on (nil
-- when it did not start).
local started = 0
local function start(dir, args)
  started = started + 1
  local own = dir .. "/job" .. started
  assert(proc.sh("mkdir " .. proc.q(own)) == 0)
  local job = proc.spawn({ "faults", table.unpack(args) }, own)
  local line = proc.wait_for(function ()
    return (job:stdout() or ""):match("listening on (%S+)\n")
  end, 5)
  return job, line
end

describe("luaretry faults", function ()
  local tmp
  before_each(function () tmp = proc.tmpdir() end)
  after_each(function () proc.rmtree(tmp) end)

  it("will not listen on an address that is not loopback without --listen-any", function ()
    for _, addr in ipairs { "0.0.0.0:0", "[::]:0" } do
      local r = proc.run({ "faults", "--listen", addr, SCRIPT }, { timeout = 10 })
      assert.are.equal(3, r.code, r.stderr)
      assert.matches("will not listen on " .. addr:gsub("%p", "%%%0") .. ": not a loopback address",
                     r.stderr)
      assert.matches("%-%-listen%-any", r.stderr)
      assert.are.equal("", r.stdout)
    end
  end)

  it("a --listen that is no address is a usage error (exit 2) naming it; one it cannot take, exit 3", function ()
    for _, addr in ipairs { "127.0.0.1:abc", "127.0.0.1:99999", "127.0.0.1:", "[::1", "::1:80" } do
      local r = proc.run({ "faults", "--listen", addr, SCRIPT }, { timeout = 10 })
      assert.are.equal(2, r.code, addr .. ": " .. r.stderr)
      assert.truthy(r.stderr:find("faults: --listen " .. addr .. ": not HOST:PORT", 1, true), r.stderr)
      assert.matches("usage: luaretry faults", r.stderr)
      assert.are.equal("", r.stdout)
    end
    -- well formed, but no such host: not a usage error
    local r = proc.run({ "faults", "--listen", "no-such-host.invalid:0", SCRIPT }, { timeout = 30 })
    assert.are.equal(3, r.code, r.stderr)
    assert.matches("cannot listen on no%-such%-host%.invalid:0", r.stderr)
  end)

  it("listens on 127.0.0.1 by default, and on localhost, without a warning", function ()
    for _, args in ipairs { { SCRIPT }, { "--listen", "localhost:0", SCRIPT } } do
      local job, addr = start(tmp, args)
      finally(function () job:stop() end)
      assert.matches("^127%.0%.0%.1:%d+$", addr)
      job:stop()
      assert.is_nil((job:stderr() or ""):find("warning"), job:stderr())
    end
  end)

  it("with --listen-any listens on every interface, and says so on every start", function ()
    for _ = 1, 2 do
      local job, addr = start(tmp, { "--listen-any", "--listen", "0.0.0.0:0", SCRIPT })
      finally(function () job:stop() end)
      assert.matches("^0%.0%.0%.0:%d+$", addr)
      assert.truthy(proc.wait_for(function ()
        return (job:stderr() or ""):find("warning: listening on 0%.0%.0%.0:%d+, not a loopback address")
      end, 2), job:stderr())
      job:stop()
    end
  end)

  it("the first SIGINT or SIGTERM ends it while its script loops at load", function ()
    local script = tmp .. "/loadloop.lua"
    proc.writefile(script, "while true do end\nrespond = 200\n")
    local jobs = {}
    finally(function () for _, job in ipairs(jobs) do job:stop() end end)
    for _, sig in ipairs { "INT", "TERM" } do
      local dir = tmp .. "/" .. sig
      assert(lfs.mkdir(dir))
      local job = proc.spawn({ "faults", "--listen", "127.0.0.1:0", script }, dir)
      jobs[#jobs + 1] = job
      -- the moment its handler is in: a signal before it ends the process
      -- by default, which would prove nothing
      local caught = proc.wait_for(function ()
        local mask = (proc.readfile("/proc/" .. job.pid .. "/status") or ""):match("\nSigCgt:%s*%x*(%x%x%x%x%x%x%x%x)\n")
        return mask and (tonumber(mask, 16) >> ((sig == "INT" and 2 or 15) - 1)) & 1 == 1
      end, 30)
      assert.truthy(caught, "luaretry faults never caught SIG" .. sig)
      job:signal(sig)
      local code = job:wait(30)
      assert.are.equal(130, code, "still loading 30 s after one SIG" .. sig)
      assert.matches("loadloop%.lua:1: stopped", job:stderr())
      assert.are.equal("", job:stdout())
    end
  end)

  it("a SIGINT ends it even while its script's pattern match backtracks", function ()
    local script = tmp .. "/busy.lua"
    -- a pattern that backtracks for minutes inside one C call: the
    -- sandbox's metered matcher looks at the stop flag between its steps
    proc.writefile(script, [[respond = function ()
  local s = string.rep("a", 3000)
  return tostring(s:find(".-.-.-.-b"))
end
]])
    local job, addr = start(tmp, { script })
    finally(function () job:stop() end)
    assert.truthy(addr)
    local curl = io.popen("env -u LD_PRELOAD curl -s --max-time 20 http://" .. addr .. "/ 2>&1")
    proc.sleep(0.3)
    assert.is_true(proc.alive(job.pid), "the server ended before the signal")
    local sent = job:signal("INT")
    local code, ended = job:wait(5)
    curl:close()
    assert.are.equal(0, code)  -- the first signal: a clean stop
    assert.is_true(ended - sent < 3, ("ended %.3f s after the SIGINT"):format(ended - sent))
  end)
end)
