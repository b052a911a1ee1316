-- The fleet's circuit breaker, through the local store (--fleet local)
-- and a real redis-server, with the rules of the local one
-- (luaretry-policy(5), "One attempt, every guard"): an open period
-- anywhere in the schema's range (1e20 s) keeps the circuit open.  Real
-- `luaretry run` processes against the real fault server, each test with
-- a fleet key of its own.
local proc = require "support.proc"
local redis = require "support.redis"
local fleet = require "support.fleet"
local q = proc.q

local DIR = proc.root .. "/spec/fixtures/fleet_breaker/"
local POLICY, SERVER = DIR .. "breaker.lua", DIR .. "server.lua"
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
