-- The local store (README "Fleet"): the processes of one user share a
-- policy's guards through a shared-memory file, no server.  Real `luaretry
-- run --fleet local` processes against the real fault server, each spec
-- with a folder of its own ($XDG_RUNTIME_DIR, made 0700 here) and a key of
-- its own; files that are not the store's are refused and the local guards
-- decide.  The crash-safety of the store (writers SIGKILLed mid-update):
-- spec/c/test_fleet_local.c.
local proc = require "support.proc"
local fleet = require "support.fleet"
local lr = require "luaretry"
local q = proc.q

local BUDGET = proc.root .. "/spec/fixtures/fleet/budget.lua"
local BREAKER = proc.root .. "/spec/fixtures/fleet/breaker.lua"
local SERVER = proc.root .. "/spec/fixtures/fleet/server.lua"
local RATE = proc.root .. "/spec/fixtures/fleet_rate/rate.lua"
local RATE_SERVER = proc.root .. "/spec/fixtures/fleet_rate/server.lua"
local REFUSE = proc.root .. "/spec/fixtures/fleet_throttle/refuse.lua"
local WORKFLOW = proc.root .. "/spec/fixtures/fleet_throttle/workflow.lua"
local REFUSED = "fleet guards %(local%): .-; local guards decide"

local new_key, count = fleet.keys("local"), fleet.count

-- fleet.many, each process with XDG_RUNTIME_DIR=run.
local function many(n, run, args_of)
  return fleet.many(n, args_of, { env = { "XDG_RUNTIME_DIR=" .. run } })
end

describe("the local store (--fleet local)", function ()
  local srv, tmp, run
  proc.with_server(SERVER, function (s, t) srv, tmp = s, t end)
  before_each(function ()
    run = tmp .. "/run"
    proc.sh("mkdir -m 700 " .. q(run))
  end)

  local function cmd(args, env)
    local e = { "XDG_RUNTIME_DIR=" .. run }
    for _, x in ipairs(env or {}) do e[#e + 1] = x end
    return proc.run(args, { env = e, timeout = 60 })
  end

  -- The store's file, as `luaretry fleet` names it (with the settings
  -- the store's processes use: others' are refused).
  local function store_of(policy, key, ...)
    local r = cmd({ "fleet", policy, "--fleet", "local", "--set", "fleet.key=" .. key, ... })
    assert.are.equal(0, r.code, r.stderr)
    return r.stdout:match(" at (%S+)\n"), r.stdout
  end

  it("shares one budget between processes: 8 runs against a 503 make far fewer than 8 x 4 attempts", function ()
    local key = new_key()
    for i = 1, 8 do
      local r = cmd({ "run", BUDGET, srv.base .. "/503", "-q", "--fleet", "local",
                      "--set", "fleet.key=" .. key })
      assert.is_true(r.code ~= 0, "run " .. i)
    end
    -- 10 tokens: the first spends 4 (6 left); each later one a failure,
    -- and its retry refused (no more than half left)
    local seen = #srv:requests_on("/503")
    assert.are.equal(4 + 7, seen)
    local file, shown = store_of(BUDGET, key)
    assert.matches("budget: 0.000 of 10 tokens", shown)
    -- the file: in the folder, the user's alone
    assert.are.equal(run, file:match("^(.*)/[^/]+$"))
    assert.are.equal("600", proc.readfile_cmd("stat -c %a " .. q(file)):match("%d+"))
    assert.are.equal("700", proc.readfile_cmd("stat -c %a " .. q(run)):match("%d+"))
    -- and with no store each process has its own: 8 x 4
    srv:reset()
    for _ = 1, 8 do cmd({ "run", BUDGET, srv.base .. "/503", "-q" }) end
    assert.are.equal(32, #srv:requests_on("/503"))
  end)

  it("shares one budget between processes running at once, and LUARETRY_FLEET=local asks for it", function ()
    local key = new_key()
    local res = many(10, run, function ()
      return { "run", BUDGET, srv.base .. "/503", "-q", "--set", "fleet.key=" .. key }
    end)
    for i, x in ipairs(res) do assert.is_true(x.code ~= 0, "process " .. i .. ": " .. x.stderr) end
    assert.are.equal(40, #srv:requests_on("/503")) -- without it: nothing shared
    srv:reset()
    res = many(10, run, function ()
      return { "run", BUDGET, srv.base .. "/503", "-q", "--fleet", "local", "--set",
               "fleet.key=" .. key }
    end)
    local seen = #srv:requests_on("/503")
    -- the model: simulate --fleet local, every outcome counted at once
    local sim = proc.run({ "simulate", BUDGET, "--clients", "10", "--fleet", "local", "--json" })
    assert.are.equal(0, sim.code, sim.stderr)
    local m = proc.json.decode(sim.stdout)
    print(("\n  10 processes at once, one budget of 10 tokens: %d attempts (alone: 40; " ..
           "simulate --fleet local: %d)"):format(seen, m.fleet.attempts))
    assert.are.equal(0, m.sync_ms)
    -- both within the budget's bound: 10 first attempts, and retries only
    -- while more than 5 of the 10 tokens are left (one more for a retry
    -- decided at once by two processes); how many below it depends on when
    -- the processes start, which the model takes as all at t=0
    assert.is_true(seen <= 10 + 6, seen .. " attempts")
    assert.is_true(m.fleet.attempts <= 10 + 6, m.fleet.attempts .. " attempts in the model")
    assert.are.equal(40, m.own.attempts)
    local r = cmd({ "run", BUDGET, srv.base .. "/503", "-q", "--set", "fleet.key=" .. key },
                  { "LUARETRY_FLEET=local" })
    assert.matches("the fleet's retry budget refuses", r.stderr)
  end)

  it("shares the breaker: opened by one process, it refuses the next at once; --reset closes it", function ()
    local key = new_key()
    local r = cmd({ "run", BREAKER, srv.base .. "/503", "-q", "--fleet", "local",
                    "--set", "fleet.key=" .. key, "--set", "breaker.open_seconds=30" })
    assert.is_true(r.code ~= 0)
    local _, shown = store_of(BREAKER, key, "--set", "breaker.open_seconds=30")
    assert.matches("breaker: open", shown)
    srv:reset()
    r = cmd({ "run", BREAKER, srv.base .. "/200", "-q", "--fleet", "local",
              "--set", "fleet.key=" .. key, "--set", "breaker.open_seconds=30" })
    assert.is_true(r.code ~= 0)
    assert.matches("circuit", r.stderr)
    assert.are.equal(0, #srv:requests_on("/200"))
    r = cmd({ "fleet", BREAKER, "--fleet", "local", "--set", "fleet.key=" .. key, "--reset" })
    assert.are.equal(0, r.code, r.stderr)
    -- what this policy's guards hold afresh: a breaker, and nothing else
    assert.matches("reset: breaker closed\n", r.stdout)
    r = cmd({ "run", BREAKER, srv.base .. "/200", "-q", "--fleet", "local",
              "--set", "fleet.key=" .. key, "--set", "breaker.open_seconds=30" })
    assert.are.equal(0, r.code, r.stderr)
  end)

  it("shares the breaker's rate window: half of the last 10 outcomes of 10 processes failed opens it", function ()
    local key = new_key()
    local policy = tmp .. "/rated.lua"
    proc.writefile(policy, 'name = "rated"\nmax_attempts = 1\ndeadline = 5\nattempt_timeout = 2\n' ..
                   "breaker = { failure_rate = 0.5, window = 10, min_calls = 10, open_seconds = 30 }\n")
    -- failures and successes in turn: never 5 in a row; one outcome each
    local function runs(extra)
      for i = 1, 10 do
        local a = { "run", policy, srv.base .. (i % 2 == 1 and "/503" or "/200"), "-q" }
        for _, x in ipairs(extra) do a[#a + 1] = x end
        cmd(a)
      end
      local a = { "run", policy, srv.base .. "/200", "-q" }
      for _, x in ipairs(extra) do a[#a + 1] = x end
      return cmd(a)
    end
    local alone = runs({})
    assert.are.equal(0, alone.code, alone.stderr)
    local shared = runs({ "--fleet", "local", "--set", "fleet.key=" .. key })
    assert.are_not.equal(0, shared.code)
    assert.matches("circuit", shared.stderr)
    assert.matches("breaker: open", select(2, store_of(policy, key)))
  end)

  it("counts a workflow's requests and their accepts alike: healthy workflows are never refused", function ()
    local key = new_key()
    for i = 1, 6 do
      local r = cmd({ "run", WORKFLOW, srv.base .. "/200", "--seed", tostring(i), "--fleet", "local",
                      "--set", "fleet.key=" .. key })
      assert.are.equal(0, r.code, "workflow " .. i .. ": " .. r.stderr)
      assert.are.equal("four answered\n", r.stdout)
    end
    local _, shown = store_of(WORKFLOW, key)
    assert.matches("admission window: 24 requests, 24 accepted over the last 60 s", shown)
  end)

  it("shares the client-side throttle's window: one process's refused requests refuse another's", function ()
    local key = new_key()
    local list = {}
    for i = 1, 10 do list[i] = srv.base .. "/503?" .. i end
    proc.writefile(tmp .. "/urls", table.concat(list, "\n") .. "\n")
    -- process A: 10 calls against a 503, each a request and no accept
    local a = cmd({ "run", REFUSE, "--urls", tmp .. "/urls", "-s", "--fleet", "local",
                    "--set", "fleet.key=" .. key })
    assert.is_true(a.code ~= 0, a.stderr)
    local _, shown = store_of(REFUSE, key)
    assert.matches("admission window: 10 requests, 0 accepted over the last 60 s", shown)
    -- processes B against a service that answers: the window says 10/11
    -- and more; with a key of their own the same seeds all go through
    local refused, own_refused = 0, 0
    for seed = 1, 5 do
      local b = cmd({ "run", REFUSE, srv.base .. "/200", "--seed", tostring(seed), "--fleet",
                      "local", "--set", "fleet.key=" .. key })
      if b.code == 6 then
        refused = refused + 1
        assert.matches("the fleet's admission control refuses", b.stderr)
      end
      local own = cmd({ "run", REFUSE, srv.base .. "/200", "--seed", tostring(seed), "--fleet",
                        "local", "--set", "fleet.key=" .. key .. "-own" .. seed })
      if own.code ~= 0 then own_refused = own_refused + 1 end
    end
    assert.is_true(refused >= 4, "refused: " .. refused)
    assert.are.equal(0, own_refused)
  end)

  it("refuses a file that is not the store's (truncated, garbage, a link, readable by others): said once, local guards decide", function ()
    local key = new_key()
    local file = store_of(BUDGET, key)
    local size = #proc.readfile(file)
    local function refused(why)
      srv:reset()
      local r = cmd({ "run", BUDGET, srv.base .. "/503", "--fleet", "local",
                      "--set", "fleet.key=" .. key })
      assert.are.equal(1, count(r.stderr, REFUSED), r.stderr)
      assert.matches(why, r.stderr)
      -- the local guards: a budget of its own, 4 attempts
      assert.are.equal(4, #srv:requests_on("/503"))
      local f = cmd({ "fleet", BUDGET, "--fleet", "local", "--set", "fleet.key=" .. key })
      assert.are_not.equal(0, f.code)
      assert.matches(why, f.stderr)
    end
    proc.writefile(file, "short")
    refused("of another size")
    proc.writefile(file, string.rep("x", size))
    refused("not a luaretry fleet store")
    proc.sh("chmod 644 " .. q(file))
    refused("others may read or write it")
    os.remove(file)
    proc.writefile(tmp .. "/elsewhere", "x")
    proc.sh("ln -s " .. q(tmp .. "/elsewhere") .. " " .. q(file))
    refused("a symbolic link")
    assert.are.equal("x", proc.readfile(tmp .. "/elsewhere")) -- never written through
    -- --reset removes what was refused (the link, not its target); the
    -- next process makes the store anew
    local reset = cmd({ "fleet", BUDGET, "--fleet", "local", "--set", "fleet.key=" .. key, "--reset" })
    assert.are.equal(0, reset.code, reset.stderr)
    assert.matches("a symbolic link, refused: removed", reset.stdout)
    assert.are.equal("x", proc.readfile(tmp .. "/elsewhere"))
    srv:reset()
    local r = cmd({ "run", BUDGET, srv.base .. "/503", "--fleet", "local", "--set", "fleet.key=" .. key })
    assert.are.equal(0, count(r.stderr, REFUSED), r.stderr)
    assert.matches("budget: 6.000 of 10 tokens", select(2, store_of(BUDGET, key)))
    os.remove(file)
  end)

  -- luaretry(1): a store truncated under a process's map ends it with
  -- SIGBUS, so what a user does instead, --reset and rm, never truncates
  it("a run under way goes on through --reset (the store cleared in place) and rm (its own copy until it ends)", function ()
    local key = new_key()
    local file = store_of(BUDGET, key)
    local size = #proc.readfile(file)
    local job = proc.spawn({ "run", BUDGET, srv.base .. "/503/slow", "--set", "fleet.local=" .. run,
                             "--set", "fleet.key=" .. key }, tmp)
    finally(function () job:stop() end)
    -- each while an attempt is under way (half a second): its outcome
    -- and the next attempt's questions meet the store so changed
    assert.is_truthy(proc.wait_for(function () return #srv:requests_on("/503/slow") >= 1 end, 30))
    local reset = cmd({ "fleet", BUDGET, "--fleet", "local", "--set", "fleet.key=" .. key, "--reset" })
    assert.are.equal(0, reset.code, reset.stderr)
    assert.are.equal(size, #proc.readfile(file)) -- in place, the size kept
    assert.is_truthy(proc.wait_for(function () return #srv:requests_on("/503/slow") >= 2 end, 30))
    assert.is_true(os.remove(file))
    local code = job:wait(60)
    assert.are.equal(4, code, job:stderr()) -- the last 503; a SIGBUS is 135
    assert.are.equal(0, count(job:stderr(), REFUSED), job:stderr())
    assert.are.equal(4, #srv:requests_on("/503/slow"))
    -- the next process makes the store anew
    assert.matches("budget: 10.000 of 10 tokens", select(2, store_of(BUDGET, key)))
    os.remove(file)
  end)

  it("refuses a store whose counts no process writes (garbage after the header, a time ahead of now); --reset recovers it", function ()
    local key = new_key()
    local set = { "--set", "fleet.key=" .. key }
    local file = store_of(BUDGET, key)
    local good = proc.readfile(file)
    -- lr_local_file's words (local_file.c's assert pins its size)
    local function with(offset, bytes)
      proc.writefile(file, good:sub(1, offset) .. bytes .. good:sub(offset + #bytes + 1))
    end
    local cases = {
      { 256, string.pack("<i8", 123456789012), "the budget's tokens out of range" },
      { 264, string.pack("<I8", 3 | 35938 << 2), "the breaker's state out of range" },
      { 264, string.pack("<I4I4", 0, 0x7fffffff), "the breaker's time ahead of now" },
      -- the settings' last use "0 s ago" for ever: other settings locked out
      { 840, string.pack("<I4I4", 0x7fffffff, 1), "the settings' last use ahead of now" },
    }
    for _, c in ipairs(cases) do
      with(c[1], c[2])
      srv:reset()
      local r = cmd({ "run", BUDGET, srv.base .. "/503", "--fleet", "local", set[1], set[2] })
      assert.are.equal(1, count(r.stderr, REFUSED), r.stderr)
      assert.matches(c[3] .. " %(garbage, or another layout%): refused", r.stderr)
      assert.are.equal(4, #srv:requests_on("/503"))
      local f = cmd({ "fleet", BUDGET, "--fleet", "local", set[1], set[2] })
      assert.are.equal(1, f.code, f.stdout)
      assert.matches(c[3], f.stderr)
      local reset = cmd({ "fleet", BUDGET, "--fleet", "local", set[1], set[2], "--reset" })
      assert.are.equal(0, reset.code, reset.stderr)
      assert.matches("budget: 10.000 of 10 tokens", select(2, store_of(BUDGET, key)))
    end
  end)

  it("refuses a rate limiter's or reserve's time further ahead than a process writes; takes one as far as a process may", function ()
    local key = new_key()
    local policy = tmp .. "/ahead.lua"
    proc.writefile(policy, 'name = "ahead"\nmax_attempts = 4\ndeadline = 10\nattempt_timeout = 2\n' ..
                   'backoff = { initial = 0.05, max = 0.2, jitter = "full" }\n' ..
                   "budget = { max_tokens = 10, token_ratio = 0.1, reserve = 1 }\n" ..
                   "rate = { limit = 20, burst = 1 }\n")
    local set = { "--set", "fleet.key=" .. key }
    local file = store_of(policy, key, set[1], set[2])
    local good = proc.readfile(file)
    -- lr_local_file's tat_us and reserve_tat_us (local_file.c's asserts pin
    -- them), CLOCK_MONOTONIC µs as system.monotime reads it
    local function with(offset, ahead)
      local at = math.floor((proc.now() + ahead) * 1e6)
      proc.writefile(file, good:sub(1, offset) .. string.pack("<i8", at) .. good:sub(offset + 9))
    end
    local YEAR = 365 * 86400
    for _, c in ipairs({ { 576, "the rate limiter's time ahead of now" },
                         { 584, "the budget's reserve's time ahead of now" } }) do
      with(c[1], YEAR)
      srv:reset()
      local r = cmd({ "run", policy, srv.base .. "/503", "--fleet", "local", set[1], set[2] })
      assert.are.equal(4, r.code, r.stderr) -- not 6: the rate's slot a year off
      assert.are.equal(1, count(r.stderr, REFUSED), r.stderr)
      assert.matches(c[2] .. " %(garbage, or another layout%): refused", r.stderr)
      assert.are.equal(4, #srv:requests_on("/503"))
      local f = cmd({ "fleet", policy, "--fleet", "local", set[1], set[2] })
      assert.are.equal(1, f.code, f.stdout)
      assert.matches(c[2], f.stderr)
      local reset = cmd({ "fleet", policy, "--fleet", "local", set[1], set[2], "--reset" })
      assert.are.equal(0, reset.code, reset.stderr)
      assert.matches("refused: removed", reset.stdout)
      store_of(policy, key, set[1], set[2]) -- made anew
    end
    -- the furthest a process takes a slot (LR_LEASE_HORIZON, 10 s) and the
    -- burst's interval past it: a store in use, not refused
    with(576, 10)
    local f = cmd({ "fleet", policy, "--fleet", "local", set[1], set[2] })
    assert.are.equal(0, f.code, f.stderr)
    local ahead = tonumber(f.stdout:match("slots leased out up to ([%d.]+) s ahead"))
    assert.is_true(ahead > 5 and ahead <= 10, f.stdout)
    -- a year ahead under settings of others (their hash; their last use,
    -- process 1's, two minutes ago): not judged by ours, but brought within
    -- what ours hand out (10 s and an interval) when ours take the store over
    local now_s = math.floor(proc.now())
    with(576, YEAR)
    local far = proc.readfile(file)
    proc.writefile(file, far:sub(1, 232) .. string.pack("<I8", 12345) .. far:sub(241, 840) ..
                   string.pack("<I4I4", now_s - 120, 1) .. far:sub(849))
    local r = cmd({ "run", policy, srv.base .. "/503", "--fleet", "local", set[1], set[2],
                    "--set", "max_attempts=1" })
    assert.are.equal(0, count(r.stderr, REFUSED), r.stderr)
    f = cmd({ "fleet", policy, "--fleet", "local", set[1], set[2] })
    assert.are.equal(0, f.code, f.stderr)
    ahead = tonumber(f.stdout:match("slots leased out up to ([%d.]+) s ahead"))
    assert.is_true(ahead <= 10.05, f.stdout)
  end)

  it("fleet refuses a store held by other settings, naming their process as run does; --reset frees it", function ()
    local key = new_key()
    local set = { "--set", "fleet.key=" .. key }
    local function with(args, extra)
      for _, x in ipairs(extra) do args[#args + 1] = x end
      return args
    end
    local other = cmd(with({ "run", BUDGET, srv.base .. "/503", "--fleet", "local",
                             "--set", "budget.max_tokens=1000" }, set))
    assert.are.equal(4, other.code, other.stderr)
    local r = cmd(with({ "run", BUDGET, srv.base .. "/503", "--fleet", "local" }, set))
    local pid = r.stderr:match("theirs: process (%d+)'s")
    assert.is_truthy(pid, r.stderr)
    local f = cmd(with({ "fleet", BUDGET, "--fleet", "local" }, set))
    assert.are.equal(1, f.code, f.stdout)
    assert.matches("shared with other settings %(theirs: process " .. pid .. "'s", f.stderr)
    assert.are.equal("", f.stdout)
    local reset = cmd(with({ "fleet", BUDGET, "--fleet", "local", "--reset" }, set))
    assert.are.equal(0, reset.code, reset.stderr)
    f = cmd(with({ "fleet", BUDGET, "--fleet", "local" }, set))
    assert.are.equal(0, f.code, f.stderr)
    assert.matches("budget: 10.000 of 10 tokens", f.stdout)
  end)

  it("fleet --reset removes a refused entry it can (a folder at the store's path), and says what", function ()
    local key = new_key()
    local set = { "--set", "fleet.key=" .. key }
    local file = store_of(BUDGET, key)
    os.remove(file)
    proc.sh("mkdir " .. q(file))
    local r = cmd({ "run", BUDGET, srv.base .. "/503", "--fleet", "local", set[1], set[2] })
    assert.are.equal(1, count(r.stderr, REFUSED), r.stderr)
    assert.matches("cannot be opened: Is a directory", r.stderr)
    -- a folder with something in it is never emptied
    proc.writefile(file .. "/x", "x")
    local reset = cmd({ "fleet", BUDGET, "--fleet", "local", set[1], set[2], "--reset" })
    assert.are.equal(1, reset.code, reset.stdout)
    assert.matches("a folder, cannot be removed", reset.stderr)
    assert.are.equal("x", proc.readfile(file .. "/x"))
    os.remove(file .. "/x")
    reset = cmd({ "fleet", BUDGET, "--fleet", "local", set[1], set[2], "--reset" })
    assert.are.equal(0, reset.code, reset.stderr)
    assert.matches("a folder, refused: removed; the next process makes the store anew", reset.stdout)
    assert.matches("budget: 10.000 of 10 tokens", select(2, store_of(BUDGET, key)))
  end)

  it("refuses a folder others may write to", function ()
    proc.sh("chmod 777 " .. q(run))
    local r = cmd({ "run", BUDGET, srv.base .. "/503", "--fleet", "local",
                    "--set", "fleet.key=" .. new_key() })
    assert.are.equal(1, count(r.stderr, REFUSED), r.stderr)
    assert.matches("others may write to it, refused", r.stderr)
    assert.are.equal(4, #srv:requests_on("/503"))
    proc.sh("chmod 700 " .. q(run))
    -- and one that is not there
    local gone = proc.run({ "fleet", BUDGET, "--fleet", "local" },
                          { env = { "XDG_RUNTIME_DIR=" .. tmp .. "/gone" }, timeout = 60 })
    assert.are.equal(1, gone.code)
    assert.matches("folder .*/gone: No such file or directory, refused", gone.stderr)
  end)

  it("says a refused store once even when the call makes no retry", function ()
    proc.writefile(tmp .. "/plain", "x")
    for _, dir in ipairs({ tmp .. "/plain", tmp .. "/gone" }) do
      srv:reset()
      local r = proc.run({ "run", BUDGET, srv.base .. "/503", "--fleet", "local",
                           "--set", "max_attempts=1", "--set", "fleet.key=" .. new_key() },
                         { env = { "XDG_RUNTIME_DIR=" .. dir }, timeout = 60 })
      assert.are.equal(1, count(r.stderr, REFUSED), r.stderr)
      assert.are.equal(1, #srv:requests_on("/503"))
    end
  end)

  it("makes a safe file name of any key: '/', '..' and long keys stay in the folder", function ()
    for _, key in ipairs({ "../../etc/x", "a/b", "..", string.rep("k", 63) }) do
      local file = store_of(BUDGET, key)
      assert.are.equal(run, file:match("^(.*)/[^/]+$"))
      assert.matches("^luaretry%-fleet%-%x+%-%x+$", file:match("[^/]+$"))
    end
    local names = proc.ls(run)
    assert.are.equal(4, #names)
  end)

  it("holds 4 processes to one rate limit", function ()
    local key = new_key()
    local rate_srv = proc.server(RATE_SERVER)
    finally(function () rate_srv:stop() end)
    local files = {}
    for i = 1, 4 do
      local lines = {}
      for j = 1, 15 do lines[j] = ("%s/200?p%d=%d"):format(rate_srv.base, i, j) end
      files[i] = tmp .. "/urls" .. i
      proc.writefile(files[i], table.concat(lines, "\n") .. "\n")
    end
    local res = many(4, run, function (i)
      return { "run", RATE, "--urls", files[i], "--parallel-max", "4", "-s", "--fleet", "local",
               "--set", "fleet.key=" .. key }
    end)
    for i, x in ipairs(res) do assert.are.equal(0, x.code, "process " .. i .. ": " .. x.stderr) end
    local t = fleet.times(rate_srv, "/200")
    assert.are.equal(60, #t)
    -- one limit of 20 a second for all (each alone: 20 a second, 80 for
    -- the four): in any 2 s at most 2 x 20 + the burst, and one attempt
    -- per process that started late into the window; the 60 over at least
    -- 2 s (59 slots 0.05 s apart, less the lateness of the first; 4 limits:
    -- 0.75 s)
    local most = fleet.most_in(t, 2)
    print(("\n  4 processes, rate.limit=20: at most %d requests in any 2 s, %d over %.2f s")
          :format(most, #t, t[#t] - t[1]))
    assert.is_true(most <= 2 * 20 + 1 + 4, most .. " in 2 s")
    assert.is_true(t[#t] - t[1] >= 2, (t[#t] - t[1]) .. " s")
  end)

  -- The local store's rate refusal before the first attempt: one line,
  -- -q or not (it came twice: the stop's and the call's end's), naming the
  -- latest start the token misses (it said "would start at 0.000 s or
  -- later", the attempt's own moment, with the token 100 s away).
  it("a rate refusal before the first attempt is one line, -q or not, naming the latest start it misses", function ()
    local key = new_key()
    local policy = tmp .. "/slow_rate.lua"
    proc.writefile(policy, 'name = "slow-rate"\nmax_attempts = 1\ndeadline = 2\n' ..
                           'rate = { limit = 0.01, burst = 1 }\n')
    local base = { "run", policy, srv.base .. "/200", "--fleet", "local", "--set", "fleet.key=" .. key }
    local first = cmd(base)
    assert.are.equal(0, first.code, first.stderr)
    local line = "^luaretry: before attempt 1: rate_limit %(rate%): the fleet's rate limiter's " ..
                 "next token %(0%.01 per second for every process%) comes too late for the " ..
                 "deadline %(2%.000 s%): after 1%.999 s, the latest an attempt may start " ..
                 "%(one needs 1 ms%)\n$"
    for _, quiet in ipairs { false, true } do
      local args = { table.unpack(base) }
      if quiet then args[#args + 1] = "-q" end
      local r = cmd(args)
      assert.are.equal(6, r.code, r.stderr)
      assert.matches(line, r.stderr)
    end
    assert.are.equal(1, #srv:requests_on("/200"))
  end)

  -- a store named for a policy with nothing to share: what is missing is
  -- the policy's guards (it said "neither fleet.redis nor fleet.local is
  -- set", with --fleet local given)
  it("fleet for a policy with nothing to share says so, naming the store it was given", function ()
    local plain = tmp .. "/plain.lua"
    proc.writefile(plain, 'name = "plain"\nmax_attempts = 2\n')
    local what = "the policy has neither budget, breaker, admission nor a fixed rate: there is " ..
                 "nothing to share, nor any fleet to "
    for _, c in ipairs { { { "--fleet", "local" }, {}, "%-%-fleet local asks for the local store" },
                         { {}, { "LUARETRY_FLEET=local" }, "LUARETRY_FLEET asks for the local store" },
                         { { "--set", "fleet.local=" .. run }, {},
                           "%-%-set fleet%.local asks for the local store" } } do
      local args = { "fleet", plain, table.unpack(c[1]) }
      local r = cmd(args, c[2])
      assert.are.equal(3, r.code, r.stderr)
      assert.are.equal("", r.stdout)
      assert.matches("^luaretry: fleet plain: " .. c[3] .. ", but " .. what .. "show\n$", r.stderr)
      assert.is_nil(r.stderr:find("is set", 1, true), r.stderr)
    end
    local r = cmd({ "fleet", plain, "--fleet", "local", "--reset" })
    assert.are.equal(3, r.code, r.stderr)
    assert.matches(what .. "reset\n$", r.stderr)
  end)

  it("takes --fleet local only, one store at a time", function ()
    local r = cmd({ "run", BUDGET, srv.base .. "/503", "--fleet", "shared" })
    assert.are.equal(2, r.code)
    assert.matches("%-%-fleet shared: expected local", r.stderr)
    r = cmd({ "run", BUDGET, srv.base .. "/503", "--fleet", "local", "--redis", "redis://127.0.0.1:1/0" })
    assert.are.equal(2, r.code)
    assert.matches("one store at a time", r.stderr)
    r = cmd({ "run", BUDGET, srv.base .. "/503" }, { "LUARETRY_FLEET=yes" })
    assert.are.equal(2, r.code)
    assert.matches("LUARETRY_FLEET=yes: expected local", r.stderr)
    r = cmd({ "fleet", BUDGET })
    assert.are.equal(2, r.code)
    assert.matches("where is Redis%? .* %-%-fleet local or LUARETRY_FLEET=local", r.stderr)
  end)

  it("fleet takes fleet.local from --set alone, as run does", function ()
    local key = new_key()
    local r = cmd({ "fleet", BUDGET, "--set", "fleet.local=" .. run, "--set", "fleet.key=" .. key })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(run, r.stdout:match(" at (%S+)/[^/]+\n"))
    assert.matches("budget: 10.000 of 10 tokens", r.stdout)
  end)

  it("is a host setting: luaretry_policy_set(p, \"fleet.local\", ...), on, none or a folder", function ()
    local key = new_key()
    local p = assert(lr.load(BUDGET, { ["fleet.local"] = run, set = { ["fleet.key"] = key } }))
    local st = assert(p:fleet())
    assert.are.equal(key, st.key)
    assert.are.equal(10, st.tokens)
    assert.are.equal(run, st.where:match("^(.*)/[^/]+$"))
    local ok, err = p:set("fleet.local", "relative/dir")
    assert.is_nil(ok)
    assert.matches("fleet.local: expected on, none or an absolute folder", err)
    ok, err = p:set("fleet.redis", "redis://127.0.0.1:1/0")
    assert.is_nil(ok)
    assert.matches("one store at a time", err)
    assert(p:set("fleet.local", "none"))
    local none, why = p:fleet()
    assert.is_nil(none)
    assert.matches("no fleet: neither fleet.redis nor fleet.local is set, or the policy has neither " ..
                   "budget, breaker, admission nor a fixed rate", why, 1, true) -- a fixed rate is shared too
    proc.writefile(tmp .. "/s.lua", 'name = "s"\nbudget = {}\nfleet = { ["local"] = "on" }\n')
    local r = cmd({ "check", tmp .. "/s.lua" })
    assert.are_not.equal(0, r.code)
    assert.matches("fleet.local: the host says whether this machine's processes share the guards " ..
                   "%(luaretry_policy_set, %-%-set, %-%-fleet local, LUARETRY_FLEET%)", r.stdout)
  end)
end)
