-- simulate and a real run share one engine: with the same seed and the same
-- overrides, the waits are the same, to the microsecond the logs print.
local proc = require "support.proc"

local SETS = { "--set", "max_attempts=5", "--set", "backoff.initial=0.02",
               "--set", "backoff.jitter_max=0.05", "--seed", "7" }

local function waits_of(jsonl)
  local waits = {}
  for _, line in ipairs(proc.lines(jsonl)) do
    local d = proc.json.decode(line)
    if d.verdict == "retry" then waits[#waits + 1] = d.wait end
  end
  return waits
end

local function with_sets(args)
  for _, a in ipairs(SETS) do args[#args + 1] = a end
  return args
end

describe("simulate and run", function ()
  local srv
  setup(function () srv = proc.server(proc.root .. "/spec/fixtures/run/server.lua") end)
  teardown(function () if srv then srv:stop() end end)

  it("give the same waits for the same seed", function ()
    local sim = proc.run(with_sets { "simulate", proc.root .. "/policies/http.lua", "--json" },
                         { timeout = 30 })
    assert.are.equal(0, sim.code, sim.stderr)
    local log = os.tmpname()
    local run = proc.run(with_sets { "run", proc.root .. "/policies/http.lua",
                                     srv.base .. "/always503", "-q", "--log-json", log },
                         { timeout = 30 })
    assert.are.equal(4, run.code, run.stderr)
    local simulated, real = waits_of(sim.stdout), waits_of(proc.readfile(log))
    os.remove(log)
    assert.are.equal(4, #simulated)
    assert.are.same(simulated, real)
    -- and they are jittered: not all the same distance above the backoff
    assert.are_not.equal(simulated[2] - 0.04, simulated[1] - 0.02)
  end)
end)
