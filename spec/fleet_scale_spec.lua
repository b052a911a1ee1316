-- spec/bench/fleet_scale.sh, short (issue 33, "Scale"): 20 `luaretry run`
-- processes in waves of 10 through a real redis-server against an
-- always-503 fault server, beside `simulate --fleet --wave`.  The bench
-- (`make bench`) runs 1,000 and judges the figures; here only what holds
-- on any machine, however busy: the table is whole, every process made
-- its first attempt, and the round trips the processes counted are those
-- Redis counted (a process's last flush, made after it printed --stats,
-- may be missing: at most one each).
local proc = require "support.proc"

local N = 20

local function has(cmd) return proc.sh("command -v " .. cmd .. " >/dev/null 2>&1") == 0 end

describe("spec/bench/fleet_scale.sh, short", function ()
  it("20 processes in waves of 10: requests per first attempt, round trips counted twice, the model", function ()
    if not has("redis-server") or not has("redis-cli") then return pending("no redis-server") end
    local r = proc.run({ proc.root .. "/spec/bench/fleet_scale.sh", tostring(N), "10", "1", "2000" },
                       { bin = "bash", plain = true, timeout = 600,
                         env = { "LUARETRY_BIN=" .. proc.bin, "FLEET_SCALE_OWN=0" } })
    assert.are.equal(0, r.code, r.stderr .. r.stdout)
    local sent = tonumber(r.stdout:match("requests per first attempt, fleet guards | [%d.]+ %((%d+) requests%)"))
    assert.is_not_nil(sent, r.stdout)
    assert.is_true(sent >= N, r.stdout)
    local counted = tonumber(r.stdout:match("%(%-%-stats%) | [%d.]+ %((%d+) round trips"))
    local redis = tonumber(r.stdout:match("SCRIPT LOAD %d+%) | [%d.]+ %((%d+);"))
    assert.is_not_nil(counted, r.stdout)
    assert.is_not_nil(redis, r.stdout)
    -- each process: its connect's SCRIPT LOAD and its first sync at least
    assert.is_true(counted >= 2 * N, r.stdout)
    assert.is_true(counted <= redis and redis <= counted + N, r.stdout)
    -- the model ran with the same waves and counted its round trips
    assert.matches("| round trips per process | [%d.]+ | [%d.]+ | [%d.]+ |", r.stdout)
    assert.matches("fleet: exit statuses", r.stdout, 1, true)
  end)
end)
