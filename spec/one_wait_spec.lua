-- check, simulate and run reach every wait through the same code (issue
-- 28, finding 8): a 429 whose wait the script reads from a header the
-- engine does not know (X-Retry-In-Ms: 200) waits the same in `run`
-- against a server, in `simulate --probe` and in `check --probe`, for the
-- same seed and the same attempt: the server's 0.2 s spread upward by the
-- jitter on the first, the throttling backoff (longer by then) on the
-- second.  The figures of the finding (1.82 s in run, 0.77 s in check)
-- were two attempts: the second's throttling backoff is twice the first's.
local proc = require "support.proc"

local HERE = proc.root .. "/spec/fixtures/guards/"
local POLICY = HERE .. "hint.lua"

-- "retry in W s (SOURCE" for each attempt, from a command's output.
local function waits(text)
  local out = {}
  for w, src in text:gmatch("retry in (%d+%.%d+) s %((%a+)") do out[#out + 1] = { tonumber(w), src } end
  return out
end

describe("one wait, three commands", function ()
  local srv
  proc.with_server(HERE .. "hint_server.lua", function (s) srv = s end)

  it("run, simulate and check agree on a script-read server wait, seed for seed", function ()
    local run = proc.run({ "run", POLICY, srv.base .. "/x", "--seed", "7" }, { timeout = 30 })
    assert.are.equal(0, run.code, run.stderr)
    local ran = waits(run.stderr)
    assert.are.equal(2, #ran, run.stderr)
    local sim = proc.run({ "simulate", POLICY, "--seed", "7", "--attempts", "3",
                           "--probe", "429 [X-Retry-In-Ms: 200]" }, { timeout = 30 })
    assert.are.equal(0, sim.code, sim.stderr)
    local simulated = waits(sim.stdout .. sim.stderr)
    assert.is_true(#simulated >= 2, sim.stdout)
    for i = 1, 2 do
      assert.are.equal(simulated[i][2], ran[i][2])
      assert.is_true(math.abs(simulated[i][1] - ran[i][1]) < 0.0015, ("attempt %d: %g vs %g"):format(i, simulated[i][1], ran[i][1]))
    end
    -- never earlier than the server asked, whichever wait was the longer
    assert.is_true(ran[1][1] >= 0.2 and ran[2][1] >= 0.2, run.stderr)
    -- check's probe is a first attempt, on its own fixed seed: the server's
    -- wait, at least 0.2 s and at most the jitter above it
    local chk = proc.run({ "check", POLICY, "--probe", "429 [X-Retry-In-Ms: 200]" }, { timeout = 30 })
    assert.are.equal(0, chk.code, chk.stderr)
    local w = tonumber(chk.stdout:match("429 %[X%-Retry%-In%-Ms: 200%]%s+retry%s+server (%d+%.%d+) s"))
    assert.is_true(w and w >= 0.2 and w <= 1.2, chk.stdout)
  end)
end)
