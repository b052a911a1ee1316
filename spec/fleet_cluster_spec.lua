-- The fleet on a Redis Cluster (README "Fleet", luaretry(1) --redis):
-- redis:// to any node; the keys' slot is found by following MOVED, and a
-- slot being migrated by following ASK.  On loopback: three masters made
-- by `redis-cli --cluster create`, each with its nodes file in a temporary
-- folder; the key's slot is migrated by hand (SETSLOT IMPORTING/MIGRATING,
-- MIGRATE, SETSLOT NODE) between processes' runs, so each redirect is met
-- for certain.  Every process is stopped by its PID; every wait bounded.
local proc = require "support.proc"
local redis = require "support.redis"

local SERVER = proc.root .. "/spec/fixtures/fleet/server.lua"
local LOST = ("local guards decide until Redis is back"):gsub("%p", "%%%0")
local ENV = "env -u LD_PRELOAD -u ASAN_OPTIONS "

local POLICY_TEXT = table.concat({
  'name = "cluster-fleet"', "max_attempts = 3", "deadline = 3", "attempt_timeout = 1",
  "backoff = { initial = 0.05, max = 0.05 }",
  "budget = { max_tokens = 1000, token_ratio = 0.1 }", "fleet = { sync = 50 }" }, "\n")

local cli = redis.cli_port
local count, lease_shown = require("support.fleet").count, require("support.fleet").lease_shown
local PATIENT = require("support.fleet").PATIENT

describe("the fleet on a Redis Cluster", function ()
  local srv, nodes, dir, policy
  local ids = {}

  -- the node (1-3) that owns a slot, by CLUSTER NODES' view of node 1
  local function owner(slot)
    local out = cli(nodes[1].port, "CLUSTER", "NODES")
    for line in out:gmatch("[^\n]+") do
      local id, port = line:match("^(%x+) 127%.0%.0%.1:(%d+)")
      for range in line:gmatch(" (%d+%-?%d*)") do
        local lo, hi = range:match("^(%d+)%-(%d+)$")
        lo, hi = tonumber(lo or range), tonumber(hi or range)
        if lo and slot >= lo and slot <= hi and line:find("master") then
          for i, n in ipairs(nodes) do
            if tostring(n.port) == port then return i, id end
          end
        end
      end
    end
  end

  setup(function ()
    srv = proc.server(SERVER)
    dir = proc.tmpdir()
    policy = dir .. "/policy.lua"
    proc.writefile(policy, POLICY_TEXT)
    nodes = {}
    local addrs = {}
    for i = 1, 3 do
      local d = proc.tmpdir()
      nodes[i] = redis.start { tcp = true, args = { "--cluster-enabled", "yes",
                                                    "--cluster-config-file", d .. "/nodes.conf" } }
      nodes[i].confdir = d
      addrs[i] = "127.0.0.1:" .. nodes[i].port
    end
    local made = proc.readfile_cmd(ENV .. "timeout 30 redis-cli --cluster create " ..
                                   table.concat(addrs, " ") ..
                                   " --cluster-replicas 0 --cluster-yes 2>&1")
    assert(made:find("All 16384 slots covered", 1, true), made)
    local ok = proc.wait_for(function ()
      for _, n in ipairs(nodes) do
        if not cli(n.port, "CLUSTER", "INFO"):find("cluster_state:ok", 1, true) then return false end
      end
      return true
    end, 20)
    assert(ok, "the cluster did not come up")
    for i, n in ipairs(nodes) do ids[i] = cli(n.port, "CLUSTER", "MYID") end
  end)

  teardown(function ()
    for _, n in ipairs(nodes or {}) do
      n:stop()
      proc.rmtree(n.confdir)
    end
    if srv then srv:stop() end
    if dir then proc.rmtree(dir) end
  end)

  local function run(port, key)
    -- (PATIENT timeouts for a busy machine's Redis: the default 100 ms
    -- would say an outage that these cases count as none)
    return proc.run({ "run", policy, srv.base .. "/503", "--redis",
                      "redis://127.0.0.1:" .. port .. "/0", "--set", "fleet.key=" .. key,
                      "--seed", "1", table.unpack(PATIENT) }, { timeout = 30 })
  end

  local function fleet(port, key)
    return proc.run({ "fleet", policy, "--redis", "redis://127.0.0.1:" .. port .. "/0",
                      "--set", "fleet.key=" .. key, "--set", "fleet.command_timeout=1000" },
                    { timeout = 30 })
  end

  it("finds the keys' node from any node (MOVED), and follows a slot migrated (ASK, then MOVED)", function ()
    local key = "cluster-" .. (proc.now() * 1000 // 1)
    local k = "luaretry:{" .. key .. "}"
    local slot = tonumber(cli(nodes[1].port, "CLUSTER", "KEYSLOT", k))
    -- the same slot as luaretry computes (test_fleet_url checks the CRC)
    assert.are.equal(slot, tonumber(cli(nodes[1].port, "CLUSTER", "KEYSLOT", k .. ":procs")))
    local src = owner(slot)
    assert.truthy(src, cli(nodes[1].port, "CLUSTER", "NODES"))
    local other = src % 3 + 1
    local dst = other % 3 + 1
    -- through a node that does not own the slot: MOVED, followed
    local x = run(nodes[other].port, key)
    assert.are.equal(4, x.code, x.stderr)
    assert.are.equal(0, count(x.stderr, LOST), x.stderr)
    assert.are.equal("1", cli(nodes[src].port, "EXISTS", k))
    local st = fleet(nodes[other].port, key)
    assert.are.equal(0, st.code, st.stderr)
    assert.matches("budget: 997%.000 of 1000 tokens", st.stdout)

    -- the slot migrating to dst, its keys moved already: the source
    -- answers ASK, and the process follows it
    assert.are.equal("OK", cli(nodes[dst].port, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[src]))
    assert.are.equal("OK", cli(nodes[src].port, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[dst]))
    assert.are.equal("OK", cli(nodes[src].port, "MIGRATE", "127.0.0.1", nodes[dst].port, "", 0,
                               5000, "KEYS", k, k .. ":procs", k .. ":leases", k .. ":lexp"))
    x = run(nodes[other].port, key)
    assert.are.equal(4, x.code, x.stderr)
    assert.are.equal(0, count(x.stderr, LOST), x.stderr)
    -- the update went to dst (after ASKING): three more failures there
    assert.matches("^ASK " .. slot .. " ", cli(nodes[src].port, "EXISTS", k))
    st = fleet(nodes[src].port, key)
    assert.are.equal(0, st.code, st.stderr)
    assert.matches("budget: 994%.000 of 1000 tokens", st.stdout)

    -- the migration ends: every node says dst, and MOVED leads there
    for i = 1, 3 do cli(nodes[i].port, "CLUSTER", "SETSLOT", slot, "NODE", ids[dst]) end
    for _, n in ipairs { src, other } do
      x = run(nodes[n].port, key)
      assert.are.equal(4, x.code, x.stderr)
      assert.are.equal(0, count(x.stderr, LOST), x.stderr)
    end
    st = fleet(nodes[src].port, key)
    assert.are.equal(0, st.code, st.stderr)
    assert.matches("budget: 988%.000 of 1000 tokens", st.stdout)
    assert.matches("processes that synced in the last minute: 4\n", st.stdout)
  end)

  -- Redis 7's cluster-preferred-endpoint-type unknown-endpoint: a MOVED
  -- with no host (MOVED 3999 :6380) means the host the command went to,
  -- on that port (the cluster specification); it was not followed
  it("follows a MOVED that names no host: the same host, the port given", function ()
    local key = "cluster-nohost-" .. (proc.now() * 1000 // 1)
    local k = "luaretry:{" .. key .. "}"
    local slot = tonumber(cli(nodes[1].port, "CLUSTER", "KEYSLOT", k))
    local other = owner(slot) % 3 + 1
    for i = 1, 3 do
      assert.are.equal("OK", cli(nodes[i].port, "CONFIG", "SET", "cluster-preferred-endpoint-type",
                                 "unknown-endpoint"))
    end
    finally(function ()
      for i = 1, 3 do cli(nodes[i].port, "CONFIG", "SET", "cluster-preferred-endpoint-type", "ip") end
    end)
    assert.matches("^MOVED " .. slot .. " :%d+", cli(nodes[other].port, "EXISTS", k))
    local x = run(nodes[other].port, key)
    assert.are.equal(4, x.code, x.stderr)
    assert.are.equal(0, count(x.stderr, LOST), x.stderr)
    local st = fleet(nodes[other].port, key)
    assert.are.equal(0, st.code, st.stderr)
    assert.matches("budget: 997%.000 of 1000 tokens", st.stdout)
  end)

  it("asks the budget's reserve where the slot lives now (MOVED after the process's sync)", function ()
    local key = "reserve-" .. (proc.now() * 1000 // 1)
    local k = "luaretry:{" .. key .. "}"
    local slot = tonumber(cli(nodes[1].port, "CLUSTER", "KEYSLOT", k))
    local src = owner(slot)
    local dst = src % 3 + 1
    -- a retry the fleet's tokens refuse (1 of 2 left) goes to its wait,
    -- then asks the fleet's reserve, after the slot moved to dst: no
    -- refusal said, the reserve taken there (the pre-retry refresh meets
    -- the MOVED first and, followed, takes the reserve with its sync on
    -- dst: reserve.c's own following of it is not reached here)
    local pol = dir .. "/reserve.lua"
    proc.writefile(pol, table.concat({
      'name = "cluster-reserve"', "max_attempts = 2", "deadline = 20", "attempt_timeout = 2",
      'backoff = { initial = 2, max = 2, jitter = "none" }',
      "budget = { max_tokens = 2, token_ratio = 0.1, reserve = 1 }", "fleet = { sync = 10000 }" }, "\n"))
    srv:reset()
    local jobdir = proc.tmpdir()
    local job = proc.spawn({ "run", pol, srv.base .. "/503", "--redis",
                             "redis://127.0.0.1:" .. nodes[src].port .. "/0",
                             "--set", "fleet.key=" .. key }, jobdir)
    finally(function () job:stop(); proc.rmtree(jobdir) end)
    -- its first attempt made (its syncs on src): stopped in its wait, the
    -- slot moves to dst
    assert.truthy(proc.wait_for(function () return #srv:requests_on("/503") == 1 end, 10),
                  job:stderr())
    -- and its sync after the failure made: the keys to move are on src (a
    -- busy machine sent the attempt well before the sync: MIGRATE found
    -- no key)
    assert.truthy(proc.wait_for(function () return cli(nodes[src].port, "EXISTS", k) == "1" end, 10),
                  job:stderr())
    job:signal("STOP")
    assert.are.equal(1, #srv:requests_on("/503"))
    assert.are.equal("OK", cli(nodes[dst].port, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[src]))
    assert.are.equal("OK", cli(nodes[src].port, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[dst]))
    assert.are.equal("OK", cli(nodes[src].port, "MIGRATE", "127.0.0.1", nodes[dst].port, "", 0,
                               5000, "KEYS", k, k .. ":procs", k .. ":leases", k .. ":lexp"))
    for i = 1, 3 do cli(nodes[i].port, "CLUSTER", "SETSLOT", slot, "NODE", ids[dst]) end
    job:signal("CONT")
    local code = job:wait(30)
    assert.are.equal(4, code, job:stderr()) -- both attempts made: the reserve let the retry go
    assert.are.equal(2, #srv:requests_on("/503"))
    -- MOVED followed (no refusal said), the reserve taken on dst
    assert.are.equal(0, count(job:stderr(), LOST), job:stderr())
    assert.are.equal("1", cli(nodes[dst].port, "HEXISTS", k, "rtat"))
  end)

  -- The round trips a process counts (--stats) are the commands the
  -- nodes saw, MOVED's refused one among them (INFO commandstats' calls
  -- and rejected_calls, summed over the nodes); at most two come after
  -- --stats (luaretry(1)).
  it("counts the command a MOVED refused among its round trips", function ()
    local key = "cluster-count-" .. (proc.now() * 1000 // 1)
    local slot = tonumber(cli(nodes[1].port, "CLUSTER", "KEYSLOT", "luaretry:{" .. key .. "}"))
    local other = owner(slot) % 3 + 1
    local function seen()
      local n = 0
      for _, node in ipairs(nodes) do
        local text = cli(node.port, "INFO", "commandstats")
        for _, name in ipairs { "evalsha", "eval", "script|load", "asking", "auth", "select" } do
          local calls, rejected = text:match("cmdstat_" .. name:gsub("%p", "%%%0") ..
                                             ":calls=(%d+),[^\n]-rejected_calls=(%d+)")
          n = n + tonumber(calls or 0) + tonumber(rejected or 0)
        end
      end
      return n
    end
    local function moved()
      return tonumber(cli(nodes[other].port, "INFO", "commandstats")
                      :match("cmdstat_evalsha:[^\n]-rejected_calls=(%d+)") or "0")
    end
    local before, moved0 = seen(), moved()
    local x = proc.run({ "run", policy, srv.base .. "/503", "--redis", "redis://127.0.0.1:" ..
                         nodes[other].port .. "/0", "--set", "fleet.key=" .. key, "--stats",
                         "-q", table.unpack(PATIENT) }, { timeout = 30 })
    assert.are.equal(4, x.code, x.stderr)
    assert.are.equal(0, count(x.stderr, LOST), x.stderr)
    local trips = tonumber(x.stderr:match("redis round trips (%d+)"))
    assert.is_not_nil(trips, x.stderr)
    local got = seen() - before
    assert.is_true(moved() > moved0, "no MOVED was met")
    assert.is_true(got >= trips and got <= trips + 2,
                   ("the nodes saw %d commands, the process counted %d"):format(got, trips))
  end)

  -- A process failing steadily holds a block of the budget's tokens
  -- (core/fleet/budget_lease.c): `luaretry fleet` reads it through a node
  -- that does not own the keys' slot.
  it("shows the budget's leases out, read through any node", function ()
    local key = "cluster-lease-" .. (proc.now() * 1000 // 1)
    local slot = tonumber(cli(nodes[1].port, "CLUSTER", "KEYSLOT", "luaretry:{" .. key .. "}"))
    local other = owner(slot) % 3 + 1
    local shown = lease_shown(policy, "redis://127.0.0.1:" .. nodes[other].port .. "/0", key,
                              function () return fleet(nodes[other].port, key).stdout end)
    assert.matches("\n  leases: %d+%.000 of them out in blocks to 1 process\n", shown)
  end)
end)
