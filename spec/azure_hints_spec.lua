-- The azure policies' millisecond hints (retry-after-ms, x-ms-retry-after-ms,
-- lua/azure_faults.lua) beside the rate-limit headers and max_retry_after:
-- the later of a hint and the quota's reset counts, and a hint above the
-- limit is final however many digits it has.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
package.path = here .. "/?.lua;" .. package.path
local proc = require "support.proc"

-- The rows of `luaretry check POLICY --probe P...`, in the probes' order:
-- {verdict, wait}.  check cuts a long probe's label: rows are found by
-- their first 200 characters.
local function probes(policy, list)
  local args = { "check", policy }
  for _, p in ipairs(list) do
    args[#args + 1] = "--probe"
    args[#args + 1] = p
  end
  local r = proc.run(args, { timeout = 60 })
  assert.are.equal(0, r.code, r.stdout .. r.stderr)
  local rows = {}
  for i, p in ipairs(list) do
    local label = p:sub(1, 200)
    for _, line in ipairs(proc.lines(r.stdout)) do
      if line:sub(1, #label + 2) == "  " .. label then
        local verdict, wait = line:sub(#label + 3):match("^%S*%s+(%S+)%s+(.-)%s+%S+$")
        rows[i] = { verdict = verdict, wait = wait }
      end
    end
    assert.is_truthy(rows[i], "no row for " .. p .. " in:\n" .. r.stdout)
  end
  return rows
end

local QUOTA_30 = '429 [retry-after-ms: 100] [RateLimit: "d";r=0;t=30]'
local LONG = "429 [retry-after-ms: " .. ("9"):rep(400) .. "]"
local LONG_20 = "429 [retry-after-ms: " .. ("9"):rep(20) .. "]"

describe("azure millisecond hints", function()
  it("wait until the quota's reset when it is later than the hint", function()
    local rows = probes("azure", { QUOTA_30, '429 [retry-after-ms: 40000] [RateLimit: "d";r=0;t=30]',
                                   "429 [retry-after-ms: 100]" })
    assert.are.equal("retry", rows[1].verdict)
    assert.matches("^server 30%.%d+ s$", rows[1].wait)
    assert.are.equal("retry", rows[2].verdict)    -- the hint is the later: kept
    assert.matches("^after 40%.%d+ s$", rows[2].wait)
    assert.are.equal("retry", rows[3].verdict)    -- a hint alone: as before
    assert.matches("^after 0%.%d+ s$", rows[3].wait)
  end)

  it("let max_retry_after stop a reset past it though a short hint came with it", function()
    local rows = probes("azure-interactive", { QUOTA_30 })
    assert.are.equal("server_wait_too_long", rows[1].verdict)
  end)

  it("are final above the limit however many digits they have", function()
    for _, policy in ipairs({ "azure", "azure-interactive", "azure-batch" }) do
      local rows = probes(policy, { LONG, LONG_20, "503 [x-ms-retry-after-ms: " .. ("7"):rep(330) .. ".5]" })
      for i = 1, 3 do assert.are.equal("final", rows[i].verdict, policy .. " probe " .. i) end
    end
  end)
end)
