-- One retry layer and one deadline across services: three layers on
-- loopback (luaretry run -> relay B -> relay C -> a fault server), each
-- with max_attempts = 4.  With `propagate`, each attempt tells the next
-- layer the time it is waited for and the retries it may make (0: I retry
-- myself), so the backend sees one layer's attempts, not 4 x 4 x 4, and
-- no request starts after the top's deadline.  spec/c/relay.c is the
-- middle service (RELAY, else build/relay).
local proc = require "support.proc"
local q = proc.q

local RELAY = os.getenv("RELAY") or (proc.root .. "/build/relay")

local LAYER = [[
name = "layer"
max_attempts = 4
deadline = 20
attempt_timeout = 10
backoff = { initial = 0.01, max = 0.02, jitter = "none" }
]]

-- A relay in the background on an ephemeral port: { base =, stop = }.
-- Each gets files of its own: a later relay must never read an earlier
-- one's "listening on".
local started = 0
local function relay(policy, upstream, dir, n)
  started = started + 1
  n = n .. started
  local out, err, pidfile = dir .. "/relay" .. n .. ".out", dir .. "/relay" .. n .. ".err",
                            dir .. "/relay" .. n .. ".pid"
  proc.sh("sh -c " .. q("exec " .. q(RELAY) .. " " .. q(policy) .. " " .. q(upstream) .. " >" ..
          q(out) .. " 2>" .. q(err) .. " </dev/null & echo $! > " .. q(pidfile)))
  local pid = tonumber(proc.readfile(pidfile) or "")
  local port = proc.wait_for(function ()
    return (proc.readfile(out) or ""):match("listening on 127%.0%.0%.1:(%d+)")
  end, 10)
  assert(pid and port, "relay did not start: " .. (proc.readfile(err) or ""))
  return { base = "http://127.0.0.1:" .. port, pid = pid, err = err,
           stop = function () proc.kill(pid) end }
end

-- backend <- C <- B, all under `policy`; returns B's base and a stopper.
local function chain(backend, policy, dir)
  local c = relay(policy, backend.base, dir, "c")
  local ok, b = pcall(relay, policy, c.base, dir, "b")
  if not ok then c.stop() error(b) end
  return b, function () b.stop() c.stop() end, c
end

local function layer_file(dir, extra)
  local path = dir .. "/layer.lua"
  proc.writefile(path, LAYER .. (extra or ""))
  return path
end

describe("a chain of three layers, each with max_attempts = 4", function ()
  local dir, backend
  before_each(function () dir = proc.tmpdir() end)
  after_each(function ()
    if backend then backend:stop() backend = nil end
    proc.rmtree(dir)
  end)

  local function top(policy, url, extra)
    local args = { "run", policy, "-q", url }
    for _, a in ipairs(extra or {}) do args[#args + 1] = a end
    return proc.run(args)
  end

  it("against an always-503 backend: 4 backend requests with propagate, 64 without", function ()
    backend = proc.server(proc.root .. "/policies/faults/always-503.lua")
    local plain = layer_file(dir)
    local b, stop = chain(backend, plain, dir)
    local ok, r = pcall(top, plain, b.base .. "/x")
    stop()
    assert(ok, r)
    assert.equal(4, r.code)
    assert.equal(64, #backend:requests_on("/x")) -- every layer multiplies
    backend:reset()
    local prop = dir .. "/prop.lua"
    proc.writefile(prop, LAYER .. "propagate = {}\n")
    b, stop = chain(backend, prop, dir)
    ok, r = pcall(top, prop, b.base .. "/y")
    stop()
    assert(ok, r)
    assert.equal(4, r.code)
    local seen = backend:requests_on("/y")
    assert.equal(4, #seen)
    for _, req in ipairs(seen) do assert.equal("0", req.headers["luaretry-retries"]) end
  end)

  it("against a backend that fails once: success, with one layer's requests", function ()
    backend = proc.server(proc.root .. "/policies/faults/flaky.lua") -- 503, 503, then 200
    local prop = layer_file(dir, "propagate = {}\n")
    local alone = top(prop, backend.base .. "/alone")
    assert.equal(0, alone.code)
    local b, stop = chain(backend, prop, dir)
    local ok, r = pcall(top, prop, b.base .. "/chained")
    stop()
    assert(ok, r)
    assert.equal(0, r.code)
    assert.equal("ok\n", r.stdout)
    assert.equal(#backend:requests_on("/alone"), #backend:requests_on("/chained"))
    assert.equal(3, #backend:requests_on("/chained"))
  end)

  it("a top deadline of 1 s: no backend request starts after it", function ()
    local slow = dir .. "/slow.lua"
    proc.writefile(slow, "respond = {status = 503, delay = 2}\n")
    backend = proc.server(slow)
    local prop = layer_file(dir, "propagate = {}\n")
    local b, stop, c = chain(backend, prop, dir)
    -- the server's own clock at the start, for when each request came
    proc.readfile_cmd(proc.CURL .. "-m 1 -o /dev/null " .. proc.q(backend.base .. "/mark") .. " 2>/dev/null") -- the answer is 2 s away: not waited for
    local t0 = proc.now()
    local ok, r = pcall(proc.run_timed, { "run", prop, "-q", b.base .. "/late", "--retry-max-time", "1" })
    -- what the inner layers do after the top gave up: given 2 s more than
    -- the backend's own delay, C would have retried by then
    proc.wait_for(function () return proc.now() - t0 > 3.5 end, 5)
    stop()
    assert(ok, r)
    assert.equal(5, r.code)
    local mark = assert(backend:requests_on("/mark")[1], "the mark request never came").time
    local seen = backend:requests_on("/late")
    -- C's first attempt at most (a slow machine may not get there in 1 s),
    -- none after the deadline.  The deadline runs from the top's call, not
    -- from the mark: the top's start (and exit) on a busy machine is added,
    -- as its run took it beyond the call's own elapsed time; 0.5 s of slack
    -- for the mark's own request and the layers' hops.
    assert.truthy(#seen <= 1, #seen .. " requests")
    local start = r.secs - assert(r.elapsed, "the top logged no decision")
    for _, q in ipairs(seen) do
      assert.truthy(q.time - mark <= 1.5 + start,
                    ("a request at %.3f s (the top's start and exit: %.3f s)"):format(q.time - mark, start))
      assert.truthy(tonumber(q.headers["luaretry-deadline-ms"]) <= 1000)
    end
    assert.equal("", proc.readfile(c.err))
  end)

  it("garbage inbound headers are ignored and said once", function ()
    backend = proc.server(proc.root .. "/policies/faults/always-503.lua")
    local plain = layer_file(dir)
    local c = relay(plain, backend.base, dir, "c")
    local ok, err = pcall(function ()
      for _, v in ipairs({ "-1", "nan", "99999999999999", "1.5" }) do
        local r = proc.run({ "-sS", "-o", "/dev/null", "-H", "Luaretry-Retries: " .. v,
                             c.base .. "/g" }, { bin = "curl", plain = true })
        assert.equal(0, r.code)
      end
    end)
    c.stop()
    assert(ok, err)
    -- ignored: C made its own 4 attempts each time; said once
    assert.equal(16, #backend:requests_on("/g"))
    local said = proc.readfile(c.err)
    assert.equal(1, select(2, said:gsub("does not read", "")))
  end)
end)

describe("the Lua module: p:begin{inbound =, retries =}", function ()
  local lr = require "luaretry"
  local MID = [[
name = "mid"
max_attempts = 4
deadline = 30
attempt_timeout = 4
backoff = { kind = "constant", initial = 1, jitter = "none" }
propagate = {}
]]

  it("takes the caller's retries and deadline, the smaller of repeated ones", function ()
    local p = lr.load_string(MID)
    local c, said = p:begin{ virtual = true, seed = 1,
                             inbound = { ["Luaretry-Retries"] = { "3", "1" },
                                         ["luaretry-deadline-ms"] = "2500" } }
    assert.is_nil(said)
    assert.is_true(c:timeout() <= 2.5 and c:timeout() > 2)
    assert.is_true(c:report{ status = 503 }.retry)
    local d = c:report{ status = 503 }
    assert.is_false(d.retry)
    assert.equal("exhausted", d.verdict)
    c:close()
  end)

  it("never raises what the host set, and says when it ignored garbage", function ()
    local p = lr.load_string(MID)
    local c, said = p:begin{ virtual = true, seed = 1, retries = 0,
                             inbound = { ["Luaretry-Retries"] = "5",
                                         ["Luaretry-Deadline-Ms"] = "-3" } }
    assert.matches("does not read", said)
    assert.equal(4, c:timeout()) -- the garbage deadline changed nothing
    assert.is_false(c:report{ status = 503 }.retry)
    c:close()
  end)

  it("reads every value however many: 70 of one name, 70 names", function ()
    local p = lr.load_string(MID)
    local many = {}
    for i = 1, 69 do many[i] = "3" end
    many[70] = "0" -- the smallest counts, even past the 64th value
    local c = p:begin{ virtual = true, seed = 1, inbound = { ["Luaretry-Retries"] = many } }
    assert.is_false(c:report{ status = 503 }.retry)
    c:close()
    local names = { ["Luaretry-Retries"] = "0" }
    for i = 1, 70 do names["x-other-" .. i] = { "a", "b" } end
    c = p:begin{ virtual = true, seed = 1, inbound = names }
    assert.is_false(c:report{ status = 503 }.retry)
    c:close()
    -- the module's rate-limit reader walks the same tables
    local junk = {}
    for i = 1, 70 do junk[i] = "x" end
    assert.equal(30, lr.rate_limit({ ["x-junk"] = junk, ratelimit = '"default";r=0;t=30' }, 0))
  end)

  -- a number is how a Lua host writes 0; it was left out without a
  -- word (the call made its 4 attempts), as were booleans and a list's
  -- values after its first number.
  it("reads numbers as the header values they stand for; names any other value", function ()
    local p = lr.load_string(MID)
    local c, said = p:begin{ virtual = true, seed = 1,
                             inbound = { ["Luaretry-Retries"] = 0, ["Luaretry-Deadline-Ms"] = 2500.0 } }
    assert.is_nil(said)
    assert.is_true(c:timeout() <= 2.5 and c:timeout() > 2)
    assert.is_false(c:report{ status = 503 }.retry)
    c:close()
    c, said = p:begin{ virtual = true, seed = 1, inbound = { ["Luaretry-Retries"] = { "5", 0 } } }
    assert.is_nil(said)
    assert.is_false(c:report{ status = 503 }.retry) -- the smaller, a number after a string
    c:close()
    c, said = p:begin{ virtual = true, seed = 1, inbound = { ["Luaretry-Retries"] = 1.5 } }
    assert.matches("does not read", said) -- "1.5" is no whole number: ignored, and said
    c:close()
    for _, case in ipairs{
      { { ["Luaretry-Retries"] = true }, 'inbound["Luaretry-Retries"]: a string, a number or a list of them expected, got boolean' },
      { { ["Luaretry-Retries"] = { "5", false } }, 'inbound["Luaretry-Retries"][2]: a string or a number expected, got boolean' },
      { { "0" }, "inbound: a number key (header names expected)" },
      { 5, "inbound: a table of the headers received expected, got number" },
    } do
      local ok, err = pcall(p.begin, p, { inbound = case[1] })
      assert.is_false(ok)
      assert.is_truthy(err:find(case[2], 1, true), err)
    end
    assert.equal(30, lr.rate_limit({ ["X-RateLimit-Remaining"] = 0, ["X-RateLimit-Reset"] = 30 }, 0))
    local ok, err = pcall(lr.rate_limit, { ["X-RateLimit-Reset"] = {} , ratelimit = true })
    assert.is_false(ok)
    assert.is_truthy(err:find('rate_limit["ratelimit"]: a string, a number or a list of them expected, got boolean', 1, true), err)
  end)

  it("a host's NaN deadline stays \"at once\": an inbound one does not lift it", function ()
    local p = lr.load_string(MID)
    local c = p:begin{ deadline = 0/0, inbound = { ["Luaretry-Deadline-Ms"] = "5000" } }
    local d = c:next()
    assert.is_false(d.retry)
    assert.equal("deadline", d.verdict)
    c:close()
  end)

  it("a caller's 0 ms: the call ends at once, no attempt", function ()
    local p = lr.load_string(MID)
    local c = p:begin{ inbound = { ["Luaretry-Deadline-Ms"] = "0" } }
    local d = c:next()
    assert.is_false(d.retry)
    assert.equal("deadline", d.verdict)
    c:close()
  end)

  it("adds the propagate headers to each attempt it prepares", function ()
    local p = lr.load_string(MID)
    local c = p:begin{ virtual = true, seed = 1 }
    local r = c:prepare({ method = "GET", url = "http://127.0.0.1:1/" }, 1)
    assert.equal("4000", r.headers["Luaretry-Deadline-Ms"])
    assert.equal("0", r.headers["Luaretry-Retries"])
    c:close()
  end)

  it("passes on what is left when the attempt goes: asked late, c:timeout() and the header agree", function ()
    local p = lr.load_string(MID:gsub("deadline = 30", "deadline = 2"))
    local c = p:begin{ virtual = true, seed = 1 }
    c:wait(0.6)
    local d = c:next()
    assert.is_true(math.abs(d.next_timeout - 1.4) < 1e-9)
    assert.is_true(math.abs(c:timeout() - 1.4) < 1e-9)
    local r = c:prepare({ method = "GET", url = "http://127.0.0.1:1/" }, 1)
    assert.equal("1400", r.headers["Luaretry-Deadline-Ms"])
    c:close()
  end)
end)
