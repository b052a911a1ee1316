-- The transport failures no retry heals (tls_verify, too_many_redirects,
-- redirect_refused, too_large, checksum_mismatch) are final in every
-- shipped policy and example, as luaretry(1) promises for --checksum and
-- --max-filesize: one list, retry.final_error (lua/retry.lua).
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
package.path = here .. "/?.lua;" .. package.path
local proc = require "support.proc"

local POLICIES = { "http", "gcs", "iam", "memorystore", "azure", "azure-batch",
                   "azure-interactive", "command",
                   proc.root .. "/policies/examples/aws-sdk.lua",
                   proc.root .. "/policies/examples/idempotency-key.lua",
                   proc.root .. "/policies/examples/iam-set-policy.lua" }
local FINAL = { "tls_verify", "too_many_redirects", "redirect_refused", "too_large",
                "checksum_mismatch" }
local RETRIED = { "connect", "timeout", "dns", "digest_mismatch" }

-- The verdict of each probe "0 ERR" for `policy`, by name.
local function verdicts(policy, errors)
  local args = { "check", policy }
  for _, e in ipairs(errors) do
    args[#args + 1] = "--probe"
    args[#args + 1] = "0 " .. e
  end
  local r = proc.run(args, { timeout = 60 })
  assert.are.equal(0, r.code, r.stdout .. r.stderr)
  local got = {}
  for _, e in ipairs(errors) do
    got[e] = r.stdout:match("\n  0 " .. e:gsub("%p", "%%%0") .. "%s+(%S+)")
  end
  return got
end

describe("shipped policies and transport failures", function()
  for _, policy in ipairs(POLICIES) do
    it(policy:match("[^/]*$") .. " is final on every failure no retry heals", function()
      local got = verdicts(policy, FINAL)
      for _, e in ipairs(FINAL) do
        assert.are.equal("final", got[e], policy .. ": " .. e)
      end
    end)
    it(policy:match("[^/]*$") .. " still retries a connect, timeout, dns and digest_mismatch", function()
      local got = verdicts(policy, RETRIED)
      for _, e in ipairs(RETRIED) do
        assert.are.equal("retry", got[e], policy .. ": " .. e)
      end
    end)
  end
end)
