-- The fleet's circuit breaker, through the local store (--fleet local)
-- and a real redis-server, with the rules of the local one
-- (luaretry-policy(5), "One attempt, every guard"): a throttling answer
-- to the half-open probe hands its permit back, so the next call may
-- probe; a call refused while the probe is out is told the circuit is
-- half-open, not open; and an open period anywhere in the schema's range
-- (1e20 s) keeps the circuit open.  Real `luaretry run` processes against
-- the real fault server, each test with a fleet key of its own.
local proc = require "support.proc"
local redis = require "support.redis"
local fleet = require "support.fleet"
local q = proc.q

local DIR = proc.root .. "/spec/fixtures/fleet_breaker/"
local POLICY, SERVER = DIR .. "breaker.lua", DIR .. "server.lua"
local OPEN_S = 0.3 -- the policy's open_seconds
local HALF_OPEN = "the fleet's circuit is half%-open with no probe left: its 1 probe permit is out"
local OPEN = "the fleet's circuit is open: calls fail fast for "

local new_key = fleet.keys("brk")

-- The cases, for one way of sharing: `store.args(key)` the options that
-- name it (to run and fleet alike), `store.spawned(key)` those of a run
-- in the background (proc.spawn passes no environment), `store.probes(key)`
-- the probe permits left that it holds, and `store.env` the environment.
local function cases(store, srv_of)
  local function cmd(args)
    return proc.run(args, { env = store.env(), timeout = 60 })
  end
  local function run(key, path, ...)
    return cmd(proc.concat({ "run", POLICY, srv_of().base .. path, "-q" }, store.args(key), { ... }))
  end
  local function show(key, ...)
    local r = cmd(proc.concat({ "fleet", POLICY }, store.args(key), { ... }))
    assert.are.equal(0, r.code, r.stderr)
    return r.stdout
  end

  -- The circuit opened by a 503, then its open period over: measured from
  -- the end of the run whose failure opened it (its count reached the
  -- store, or Redis with its last batch, before it ended).
  local function opened_and_over(key, open_s, ...)
    local r = run(key, "/503", ...)
    assert.are.equal(4, r.code, r.stderr)
    assert.matches("breaker: open", show(key, ...))
    proc.sleep((open_s or OPEN_S) + 0.1)
  end

  it("a 429 to the half-open probe hands its permit back: the next call probes, and closes it", function ()
    local key = new_key()
    opened_and_over(key)
    local t = run(key, "/429")
    assert.are.equal(4, t.code, t.stderr) -- the probe went, and was throttled
    assert.are.equal(1, #srv_of():requests_on("/429"))
    -- neutral: still half-open, its one permit back
    assert.matches("breaker: half_open.*; 1 probes left", show(key))
    assert.are.equal(1, store.probes(key))
    local ok = run(key, "/200")
    assert.are.equal(0, ok.code, ok.stderr)
    assert.matches("breaker: closed", show(key))
  end)

  it("a call refused while the probe is out is told the circuit is half-open, not open", function ()
    -- A permit never told of comes back after open_seconds, measured from
    -- when the probe took it: the next run must start within it, so it is
    -- long here (a process's start on a busy machine took over 0.3 s).
    local open_s = 3
    local set = { "--set", "breaker.open_seconds=" .. open_s }
    local key = new_key()
    opened_and_over(key, open_s, table.unpack(set))
    local dir = proc.tmpdir()
    local probe = proc.spawn(proc.concat({ "run", POLICY, srv_of().base .. "/held", "-q" },
                                         store.spawned(key), set), dir)
    finally(function () probe:stop(); proc.rmtree(dir) end)
    -- the probe took the permit before it sent its request
    assert.is_truthy(proc.wait_for(function () return #srv_of():requests_on("/held") == 1 end, 30))
    local r = run(key, "/200", table.unpack(set))
    assert.are.equal(6, r.code, r.stderr)
    assert.matches(HALF_OPEN, r.stderr)
    assert.is_nil(r.stderr:find("is open", 1, true), r.stderr)
    assert.are.equal(0, #srv_of():requests_on("/200"))
    assert.matches("breaker: half_open.*; 0 probes left", show(key, table.unpack(set)))
  end)

  it("breaker.open_seconds = 1e20 keeps the circuit open, as 1000 does", function ()
    for _, open in ipairs { "1000", "1e20" } do
      local key = new_key()
      local set = { "--set", "breaker.open_seconds=" .. open }
      local a = run(key, "/503", table.unpack(set))
      assert.are.equal(4, a.code, a.stderr)
      local b = run(key, "/503", table.unpack(set))
      assert.are.equal(6, b.code, open .. ": " .. b.stderr)
      assert.matches(OPEN, b.stderr)
      assert.matches("breaker: open", show(key, table.unpack(set)))
    end
    assert.are.equal(2, #srv_of():requests_on("/503"))
  end)
end

describe("the fleet's breaker, through the local store (--fleet local)", function ()
  local srv, tmp, dir
  proc.with_server(SERVER, function (s, t) srv, tmp = s, t end)
  before_each(function ()
    dir = tmp .. "/run"
    proc.sh("mkdir -m 700 " .. q(dir))
  end)
  cases({
    env = function () return { "XDG_RUNTIME_DIR=" .. dir } end,
    args = function (key) return { "--fleet", "local", "--set", "fleet.key=" .. key } end,
    spawned = function (key) return { "--set", "fleet.local=" .. dir, "--set", "fleet.key=" .. key } end,
    -- what `luaretry fleet` shows of the store's word
    probes = function (key)
      local r = proc.run({ "fleet", POLICY, "--fleet", "local", "--set", "fleet.key=" .. key },
                         { env = { "XDG_RUNTIME_DIR=" .. dir } })
      return tonumber(r.stdout:match("(%d+) probes left"))
    end,
  }, function () return srv end)
end)

describe("the fleet's breaker, through Redis (--redis)", function ()
  local r, srv
  redis.with_redis({ server = SERVER }, function (x, _, s) r, srv = x, s end)
  -- a healthy Redis on a busy machine may take more than the default
  -- 100 ms to answer
  local function args(key)
    return proc.concat({ "--redis", r.url, "--set", "fleet.key=" .. key }, fleet.PATIENT)
  end
  cases({
    env = function () return {} end,
    args = args,
    spawned = args,
    -- Redis's own count, which the next process's probe is asked of
    probes = function (key)
      return tonumber(r:cli("HGET", "luaretry:{" .. key .. "}", "probes_left"))
    end,
  }, function () return srv end)
end)
