-- iam.lua's 409 ABORTED inside a workflow, when Google's long "message"
-- pushes "status" past the first 4 KiB of the body (retry.matches' window):
-- the body's last 4 KiB are read too (retry.matches_end).
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
package.path = here .. "/?.lua;" .. package.path
local proc = require "support.proc"

local EXAMPLE = proc.root .. "/policies/examples/iam-set-policy.lua"

-- The verdict of the workflow policy for a 409 with a message of n bytes.
local function verdict(n, status)
  local body = ('{"error": {"code": 409, "message": "%s", "status": "%s"}}'):format(("m"):rep(n), status)
  local r = proc.run({ "check", EXAMPLE, "--probe", "409 body=" .. body }, { timeout = 30 })
  assert.are.equal(0, r.code, r.stderr)
  for _, line in ipairs(proc.lines(r.stdout)) do
    if line:find("^  409 body=") then return line:match("%s(%S+)%s+%S+%s+%S+$") end
  end
  error("no row in:\n" .. r.stdout)
end

describe("iam.lua's ABORTED", function()
  it("is found after a long message, past the first 4 KiB", function()
    assert.are.equal("retry", verdict(5000, "ABORTED"))
    assert.are.equal("retry", verdict(20000, "ABORTED"))
  end)
  it("is still found early, and another status is still final", function()
    assert.are.equal("retry", verdict(10, "ABORTED"))
    assert.are.equal("final", verdict(5000, "FAILED_PRECONDITION"))
  end)
end)
