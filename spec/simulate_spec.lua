-- `luaretry simulate`: the schedule of one call, and with --clients a herd of
-- clients failing together against an outage (text, --json, --svg).  Runs
-- the real build/luaretry (LUARETRY_BIN if set).
local proc = require "support.proc"

local HTTP = proc.root .. "/policies/http.lua"
-- what a simulated client may cost, in bytes (issue 30: 512 for both, so
-- that the documented 1,000,000 fit in about 500 MiB); measured ~460
-- (--fleet, its call's lazy pace's sends kept by the simulated fleet's
-- client, no cold block) and ~300 to 460 (--process)
local PER_CLIENT = 512

local function simulate(args) return proc.run({ "simulate", table.unpack(args) }, { timeout = 60 }) end

-- A small well-formedness check: every tag balanced and properly nested,
-- attributes quoted, no stray '<' or '&' in text.  Returns the list of
-- elements (name, attrs) or raises.
local function parse_xml(s)
  s = s:gsub("^<%?xml[^>]*%?>%s*", "", 1)
  assert(not s:find("<!%-%-"), "no comments expected")
  local stack, elements, pos, root_done = {}, {}, 1, false
  local function check_text(text)
    assert(not text:find("<", 1, true), "stray '<'")
    for amp in text:gmatch("&[^;]*;?") do
      assert(amp:match("^&[%a#][%w]*;$"), "bad entity " .. amp)
    end
  end
  while true do
    local a, b = s:find("<[^>]*>", pos)
    if not a then
      check_text(s:sub(pos))
      assert(s:sub(pos):match("^%s*$"), "text after the root element")
      break
    end
    check_text(s:sub(pos, a - 1))
    if #stack == 0 then assert(s:sub(pos, a - 1):match("^%s*$"), "text outside the root") end
    local tag = s:sub(a, b)
    local close, name, attrs, selfclose = tag:match("^<(/?)([%a_][%w_:%-]*)(.-)(/?)>$")
    assert(name, "malformed tag " .. tag)
    if close == "/" then
      assert(attrs:match("^%s*$") and selfclose == "", "malformed end tag " .. tag)
      assert(table.remove(stack) == name, "unbalanced </" .. name .. ">")
      if #stack == 0 then root_done = true end
    else
      assert(not root_done, "a second root element")
      local t = {}
      local rest = attrs:gsub('%s+([%a_][%w_:%-]*)="([^"<]*)"', function (k, v)
        assert(t[k] == nil, "duplicate attribute " .. k)
        t[k] = v
        return ""
      end)
      assert(rest:match("^%s*$"), "malformed attributes in " .. tag)
      elements[#elements + 1] = { name = name, attrs = t }
      if selfclose == "" then stack[#stack + 1] = name
      elseif #stack == 0 then root_done = true end
    end
    pos = b + 1
  end
  assert(#stack == 0, "unclosed <" .. tostring(stack[#stack]) .. ">")
  assert(root_done, "no root element")
  return elements
end

local function num(out, pattern) return tonumber(out:match(pattern)) end

describe("luaretry simulate", function ()
  local tmp
  before_each(function () tmp = proc.tmpdir() end)
  after_each(function () proc.rmtree(tmp) end)

  it("without --clients still prints the schedule of one call", function ()
    local r = simulate({ HTTP, "--attempts", "4", "--seed", "7" })
    assert.are.equal(0, r.code, r.stderr)
    local lines = proc.lines(r.stdout)
    assert.are.equal(4, #lines, r.stdout)
    assert.matches("^attempt 1: retry in %d+%.%d+ s %(backoff%), elapsed 0%.000 s$", lines[1])
    assert.matches("^attempt 4: exhausted at %d+%.%d+ s %(max_attempts%)$", lines[4])
    local j = simulate({ HTTP, "--attempts", "3", "--json" })
    assert.are.equal(0, j.code)
    local jl = proc.lines(j.stdout)
    assert.are.equal(3, #jl)
    assert.are.equal("exhausted", proc.json.decode(jl[3]).verdict)
  end)

  it("--clients: attempts, who succeeded, the peak and how the even spread is computed", function ()
    local r = simulate({ HTTP, "--clients", "200", "--outage", "30" })
    assert.are.equal(0, r.code, r.stderr)
    local out = r.stdout
    -- http.lua: 1+2+4+8+16 s of backoff (+ jitter) passes 30 s on the sixth attempt
    assert.are.equal(1200, num(out, "attempts: (%d+) in all"))
    assert.matches("200 at t=0, 1000 retries", out)
    assert.matches("clients: 200 succeeded, 0 gave up\n", out)
    assert.truthy(num(out, "peak: (%d+) retries in one 100 ms window"))
    assert.matches("even spread = 1000 retries, the attempts after t=0, / %d+ windows of 100 ms " ..
                   "from the first retry at [%d.]+ s to the last attempt at [%d.]+ s", out)
  end)

  it("clients that outlast their policy give up, by reason", function ()
    local r = simulate({ HTTP, "--clients", "50", "--outage", "1000" })
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("clients: 0 succeeded, 50 gave up %(exhausted 50%)", r.stdout)
    r = simulate({ HTTP, "--clients", "50", "--outage", "1000", "--set", "max_attempts=none",
                   "--set", "deadline=20" })
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("clients: 0 succeeded, 50 gave up %(deadline 50%)", r.stdout)
    r = simulate({ HTTP, "--clients", "10", "--outage", "0" })
    assert.matches("clients: 10 succeeded, 0 gave up", r.stdout)
    assert.matches("peak: no retries", r.stdout)
  end)

  it("jitter none: every client retries at the same instants, the peak is the number of clients", function ()
    local r = simulate({ HTTP, "--clients", "300", "--set", "backoff.jitter=none" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(300, num(r.stdout, "peak: (%d+) retries"))
  end)

  it("the default jitter spreads them: the peak is much lower", function ()
    local r = simulate({ HTTP, "--clients", "300" })
    assert.are.equal(0, r.code, r.stderr)
    local peak = num(r.stdout, "peak: (%d+) retries")
    assert.is_true(peak <= 300 / 4, "peak " .. peak)
    local even = num(r.stdout, "even spread: ([%d.]+) per 100 ms")
    assert.is_true(even > 0 and even < peak)
  end)

  it("--svg: well-formed, self-contained XML with one bar per time bucket", function ()
    local svg = tmp .. "/herd.svg"
    local r = simulate({ HTTP, "--clients", "500", "--outage", "30", "--seed", "3", "--svg", svg })
    assert.are.equal(0, r.code, r.stderr)
    local buckets, width = r.stdout:match("svg: [^\n]*, (%d+) buckets of ([%d.]+) s\n")
    buckets, width = tonumber(buckets), tonumber(width)
    assert.truthy(buckets, r.stdout)
    assert.is_true(buckets >= 100 and buckets <= 200, "buckets " .. buckets)
    local s = assert(proc.readfile(svg))
    local elements = parse_xml(s)
    assert.are.equal("svg", elements[1].name)
    local bars, total = 0, 0
    for _, e in ipairs(elements) do
      if e.name == "rect" and e.attrs.class == "bar" then bars = bars + 1 end
    end
    assert.are.equal(buckets, bars)
    for n in s:gmatch('<rect class="bar"[^>]*><title>[^<]*: (%d+)</title>') do total = total + tonumber(n) end
    assert.are.equal(num(r.stdout, "attempts: (%d+) in all"), total)
    -- self-contained: no scripts, no links, no external resources
    assert.is_nil(s:find("<script", 1, true))
    assert.is_nil(s:find("href", 1, true))
    assert.is_nil(s:find("url(", 1, true))
    -- a title that names the policy, the clients, the outage and the seed
    local title = s:match("<title>([^<]*)</title>")
    assert.matches("policies/http%.lua", title)
    assert.matches("500 clients", title)
    assert.matches("30 s outage", title)
    assert.matches("seed 3", title)
    -- axes labelled in seconds and counts
    assert.truthy(s:find("seconds since", 1, true))
    assert.truthy(s:find("attempts per " .. r.stdout:match("buckets of ([%d.]+) s") .. " s", 1, true))
    -- written through a temporary beside it: nothing else left in the folder
    assert.are.same({ "herd.svg" }, proc.ls(tmp))
    if proc.sh("command -v xmllint >/dev/null 2>&1") == 0 then
      assert.are.equal(0, proc.sh("env -u LD_PRELOAD xmllint --noout " .. proc.q(svg)))
    end
  end)

  -- found before the simulation runs (as run's -o is), not after it
  it("--svg that cannot be written: a usage error before the simulation, no file, no temporary left", function ()
    for _, svg in ipairs { tmp .. "/missing/herd.svg", tmp } do
      local r = simulate({ HTTP, "--clients", "20", "--svg", svg })
      assert.are.equal(2, r.code, r.stderr)
      assert.matches("^luaretry: %-%-svg " .. svg:gsub("%p", "%%%0") .. ": ", r.stderr)
      assert.are.equal("", r.stdout)
      assert.are.same({}, proc.ls(tmp))
    end
  end)

  it("--svg to a full disk: the summary, the write error said, exit 1 (a file not written, not a policy error)", function ()
    local r = simulate({ HTTP, "--clients", "5", "--svg", "/dev/full" })
    assert.are.equal(1, r.code, r.stderr)
    assert.matches("^luaretry: %-%-svg /dev/full: writing: No space left on device\n$", r.stderr)
    assert.matches("^simulate: http ", r.stdout)
  end)

  it("--svg labels the outage with its status: 503 by default, --status's otherwise", function ()
    for _, status in ipairs { "503", "429" } do
      local svg = tmp .. "/" .. status .. ".svg"
      local args = { HTTP, "--clients", "20", "--outage", "5", "--svg", svg }
      if status ~= "503" then args = proc.concat(args, { "--status", status }) end
      local r = simulate(args)
      assert.are.equal(0, r.code, r.stderr)
      local labels = {}
      for code in proc.readfile(svg):gmatch(">outage %((%d+)%)</text>") do labels[#labels + 1] = code end
      assert.are.same({ status }, labels)
    end
  end)

  it("the same seed gives the same output, a different seed a different one", function ()
    local function go(seed, name)
      local svg = tmp .. "/" .. name
      local r = simulate({ HTTP, "--clients", "100", "--seed", seed, "--svg", svg })
      assert.are.equal(0, r.code, r.stderr)
      return r.stdout:gsub(proc.q(svg):sub(2, -2):gsub("%p", "%%%0"), "FILE"), proc.readfile(svg)
    end
    local out1, svg1 = go("5", "a.svg")
    local out2, svg2 = go("5", "b.svg")
    local out3, svg3 = go("6", "c.svg")
    assert.are.equal(out1, out2)
    assert.are.equal(svg1, svg2)
    assert.are_not.equal(out1, out3)
    assert.are_not.equal(svg1:gsub("seed %d+", ""), svg3:gsub("seed %d+", ""))
    local j1 = simulate({ HTTP, "--clients", "20", "--seed", "9", "--json" })
    local j2 = simulate({ HTTP, "--clients", "20", "--seed", "9", "--json" })
    local j3 = simulate({ HTTP, "--clients", "20", "--seed", "10", "--json" })
    assert.are.equal(j1.stdout, j2.stdout)
    assert.are_not.equal(j1.stdout, j3.stdout)
  end)

  it("--json with --clients: one object per attempt {client, attempt, time, verdict}", function ()
    local r = simulate({ HTTP, "--clients", "10", "--outage", "5", "--json" })
    assert.are.equal(0, r.code, r.stderr)
    local lines = proc.lines(r.stdout)
    local per_client, last = {}, {}
    for _, line in ipairs(lines) do
      local o = proc.json.decode(line)
      assert.is_number(o.client)
      assert.is_number(o.attempt)
      assert.is_number(o.time)
      assert.is_string(o.verdict)
      per_client[o.client] = (per_client[o.client] or 0) + 1
      assert.are.equal(per_client[o.client], o.attempt)
      if o.time < 5 then assert.are.equal(503, o.status) else assert.are.equal(200, o.status) end
      last[o.client] = o
    end
    for c = 0, 9 do
      assert.are.equal("success", last[c].verdict)
      assert.is_true(last[c].time >= 5)
    end
    -- client i uses seed + i: client 0 of seed 2 is client 1 of seed 1
    local a = simulate({ HTTP, "--clients", "2", "--seed", "1", "--json" })
    local b = simulate({ HTTP, "--clients", "1", "--seed", "2", "--json" })
    local times_a, times_b = {}, {}
    for _, line in ipairs(proc.lines(a.stdout)) do
      local o = proc.json.decode(line)
      if o.client == 1 then times_a[#times_a + 1] = o.time end
    end
    for _, line in ipairs(proc.lines(b.stdout)) do times_b[#times_b + 1] = proc.json.decode(line).time end
    assert.are.same(times_a, times_b)
  end)

  -- 1,000,000 clients, the documented maximum, must fit a laptop: --fleet
  -- took 5.7 KiB a client (a guards' state of 4 KiB each), then 4.8 KiB
  -- once http.lua's adaptive rate gave each client a pace from the start;
  -- the figures are spec/bench/README.md's.  What a client costs is the
  -- slope between two runs (the process's own size cancels out), with the
  -- shipped policy as it is and without its rate.
  local function peak_rss(args)
    local dir = proc.tmpdir()
    local job = proc.spawn(args, dir)
    local peak = proc.watch_rss(job, 120)
    local code = job:wait(5)
    job:stop()
    proc.rmtree(dir)
    assert.are.equal(0, code)
    return peak
  end
  for _, extra in ipairs({ {}, { "--set", "rate=none" } }) do
    for _, mode in ipairs({ "--fleet", "--process" }) do
      local label = table.concat({ mode, table.unpack(extra) }, " ")
      it(label .. ": a client costs at most " .. PER_CLIENT .. " bytes (50,000 vs 150,000 clients)", function ()
        if proc.asan() then return end -- ASan's shadow memory inflates it
        local rss = {}
        for _, n in ipairs({ 50000, 150000 }) do
          local args = { "simulate", HTTP, "--clients", tostring(n), mode }
          for _, a in ipairs(extra) do args[#args + 1] = a end
          rss[n] = peak_rss(args)
        end
        local slope = (rss[150000] - rss[50000]) / 100000
        assert.is_true(slope > 0 and slope <= PER_CLIENT, ("%s: %.0f bytes a client"):format(label, slope))
        assert.is_true(rss[150000] < 150000 * PER_CLIENT + 64 * 1048576,
          ("%s: peak RSS %.1f MiB"):format(label, rss[150000] / 1048576))
      end)
    end
  end

  -- the clients with guards of their own beside the fleet ran one after
  -- the other and pushed a rate limiter's wait onto a heap they have not
  -- (a crash on 429s with the adaptive rate)
  it("--fleet against 429s: the clients on their own wait for the adaptive rate", function ()
    local r = simulate({ HTTP, "--clients", "200", "--fleet", "--status", "429", "--seed", "1" })
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("own guards %(a process each%): +%d+ attempts", r.stdout)
  end)

  -- issue 33 (Scale): the model's round trips to Redis beside its
  -- amplification, clients started in waves as a batch starts processes
  local function fleet_json(args)
    local r = simulate(args)
    assert.are.equal(0, r.code, r.stderr)
    return proc.json.decode(r.stdout)
  end

  it("--fleet --wave: the clients start a wave at a time; round trips per second of their lives",
    function ()
    local j = fleet_json({ HTTP, "--clients", "300", "--fleet", "--wave", "100@5", "--outage", "1e6",
                           "--json" })
    assert.are.equal(100, j.wave)
    assert.are.equal(5, j.wave_every)
    local f = j.fleet
    assert.are.equal(300, f.first_attempts)
    -- the third wave's first attempts at 10 s; no attempt after its calls end
    assert.is_true(f.last_attempt >= 10 and f.last_attempt < 10 + 60, tostring(f.last_attempt))
    -- each process: its first sync at least (no SCRIPT LOAD at connect),
    -- and the script's first use in the fleet: NOSCRIPT, then EVAL
    assert.is_true(f.round_trips >= 300 + 1, tostring(f.round_trips))
    assert.is_true(f.client_seconds > 0)
    assert.is_true(math.abs(j.round_trips_per_second - f.round_trips / f.client_seconds) < 1e-3)
    assert.are.equal(0, j.own.round_trips)
    -- all at t=0: every first attempt at 0, the same clients otherwise
    local t0 = fleet_json({ HTTP, "--clients", "300", "--fleet", "--outage", "1e6", "--json" })
    assert.is_true(t0.fleet.last_attempt < f.last_attempt)
    -- the text says it too
    local r = simulate({ HTTP, "--clients", "300", "--fleet", "--wave", "100@5", "--outage", "1e6" })
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("300 clients start, 100 every 5 s", r.stdout, 1, true)
    assert.matches("round trips to Redis: %d+, %d+%.%d+ per second of a client's life", r.stdout)
    -- the local store makes none
    local l = simulate({ HTTP, "--clients", "300", "--fleet", "local", "--json" })
    assert.are.equal(0, l.code, l.stderr)
    local lj = proc.json.decode(l.stdout)
    assert.are.equal(0, lj.fleet.round_trips)
    assert.is_nil(lj.round_trips_per_second)
  end)

  -- a client in an outage counts the commands a process sends (spec/bench
  -- README's fleet scale): its first sync, its failure's batch at the sync
  -- period's end, and the sync before its retry, which asks the fleet's
  -- reserve for it (the tokens refused it before its wait): 3, where the
  -- reserve asked apart made 4 (4.03 on 2026-11-29's main); the first wave,
  -- whose tokens allowed the retry before the wait, asks it apart (3.07)
  it("--fleet --wave against an outage: about 3 round trips a client, the reserve's question in its sync", function ()
    local f = fleet_json({ HTTP, "--clients", "2000", "--fleet", "--wave", "100@5", "--outage",
                           "1e6", "--json" }).fleet
    assert.is_true(f.round_trips >= 2.9 * 2000 and f.round_trips <= 3.2 * 2000,
                   ("%d round trips for 2000 clients"):format(f.round_trips))
  end)

  it("--fleet: failures a leased block of budget tokens pays for make no round trip", function ()
    -- one client failing every 10 ms with a budget that lets it retry:
    -- before leases each failure was a round trip (at once, or before its
    -- retry); a block sized to the failures of a sync period pays for most
    local j = fleet_json({ HTTP, "--clients", "1", "--fleet", "--outage", "1e6", "--json",
                           "--set", "max_attempts=100", "--set", "budget.max_tokens=1000",
                           "--set", "backoff.kind=constant", "--set", "backoff.initial=0.01",
                           "--set", "backoff.jitter=none", "--set", "rate=none" })
    local f = j.fleet
    assert.are.equal(100, f.attempts)
    assert.is_true(f.round_trips < f.attempts / 4, ("%d round trips for %d failures"):format(
      f.round_trips, f.attempts))
    -- with its failures 1 s apart the block goes back between them (two
    -- sync periods without one): a round trip before each retry
    local slow = fleet_json({ HTTP, "--clients", "1", "--fleet", "--outage", "1e6", "--json",
                              "--set", "max_attempts=20", "--set", "budget.max_tokens=1000",
                              "--set", "backoff.kind=constant", "--set", "backoff.initial=1",
                              "--set", "backoff.jitter=none", "--set", "rate=none" })
    assert.is_true(slow.fleet.round_trips >= slow.fleet.attempts, tostring(slow.fleet.round_trips))
  end)

  it("--fleet: the fleet's fixed rate gives no token in the deadline's last millisecond", function ()
    -- two clients at t=0 sharing 1 request a second: the second's token
    -- comes at 1.000 s (the virtual clock's, the same on every run)
    local function herd(deadline)
      return fleet_json({ HTTP, "--clients", "2", "--fleet", "--outage", "0", "--json",
                          "--set", "rate.limit=1", "--set", "rate.burst=1", "--set", "rate.adaptive=false",
                          "--set", "deadline=" .. deadline }).fleet
    end
    local room = herd(1.002)
    assert.are.same({ success = 2 }, room.stops)
    assert.are.equal(1, room.last_attempt)
    -- 0.5 ms before the deadline: refused by the limiter, not taken and
    -- then stopped by the deadline as the attempt is asked for
    local late = herd(1.0005)
    assert.are.same({ success = 1, rate_limit = 1 }, late.stops)
    assert.are.equal(1, late.attempts)
  end)

  it("usage errors exit 2", function ()
    assert.are.equal(2, simulate({ HTTP, "--clients", "10", "--wave", "5@1" }).code) -- no --fleet
    for _, w in ipairs({ "0@1", "5", "5@", "@1", "5@-1", "5@x", "x@1", "5@1e7" }) do
      local r = simulate({ HTTP, "--clients", "10", "--fleet", "--wave", w })
      assert.are.equal(2, r.code, w)
      assert.matches("--wave", r.stderr, 1, true)
    end
    assert.are.equal(2, simulate({ HTTP, "--svg", tmp .. "/x.svg" }).code)
    assert.are.equal(2, simulate({ HTTP, "--outage", "5" }).code)
    assert.are.equal(2, simulate({ HTTP, "--clients", "0" }).code)
    assert.are.equal(2, simulate({ HTTP, "--clients", "10", "--outage", "-1" }).code)
    assert.are.equal(2, simulate({ HTTP, "--clients", "10", "--outage", "nan" }).code)
    assert.are.same({}, proc.ls(tmp))
  end)
end)

-- --fleet and --process counted the clients' policy errors and exited 3
-- without a word of what the script did wrong; plain --clients names the
-- first client's error, file and line
describe("luaretry simulate --clients N: a script that fails", function ()
  local tmp
  before_each(function () tmp = proc.tmpdir() end)
  after_each(function () proc.rmtree(tmp) end)

  it("names the first client's error, file and line, with and without --fleet or --process", function ()
    local path = tmp .. "/broken.lua"
    proc.writefile(path, "max_attempts = 5\ndeadline = 100\nbudget = { max_tokens = 10 }\n" ..
                   'function is_transient(s, b, i) error("always broke") end\n')
    local line = "^luaretry: simulate: client 0: is_transient: " .. path:gsub("%p", "%%%0") ..
                 ":4: always broke\n$"
    for _, mode in ipairs({ {}, { "--fleet" }, { "--fleet", "local" }, { "--process" },
                            { "--fleet", "--json" }, { "--process", "--json" } }) do
      local r = simulate(proc.concat({ path, "--clients", "20" }, mode))
      local what = table.concat(mode, " ")
      assert.are.equal(3, r.code, what .. ": " .. r.stderr)
      assert.matches(line, r.stderr, nil, false, what)
      assert.matches("policy_error", r.stdout, 1, true, what)
    end
  end)
end)
