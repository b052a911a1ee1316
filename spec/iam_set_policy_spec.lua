-- policies/examples/iam-set-policy.lua on a getIamPolicy answer of the
-- wrong shape (a binding without members, bindings that are no list, ...):
-- a retriable 502 that names what is wrong, never a script error (exit 3),
-- and no setIamPolicy.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
package.path = here .. "/?.lua;" .. package.path
local proc = require "support.proc"

local EXAMPLE = proc.root .. "/policies/examples/iam-set-policy.lua"
local SERVER = proc.root .. "/spec/fixtures/workflow/malformed_iam_server.lua"

describe("iam-set-policy.lua on a malformed policy", function()
  local srv
  setup(function() srv = proc.server(SERVER) end)
  teardown(function() if srv then srv:stop() end end)

  local CASES = { nomembers = "binding 1 has no members", string = "bindings is not a list",
                  notable = "binding 1 has no role", badmember = "binding 1: member 1 is not a string",
                  array = "not a JSON object" }
  for case, why in pairs(CASES) do
    it(case .. ": a retried 502 (" .. why .. ")", function()
      local r = proc.run({ "run", EXAMPLE, srv.base .. "/v1/" .. case, "roles/viewer", "user:a@example.com",
                           "--set", "max_attempts=2", "--set", "backoff.initial=0.01", "--seed", "1" },
                         { timeout = 30 })
      assert.are.equal(4, r.code, r.stderr)                      -- exhausted, not a policy error
      assert.matches("attempt 1/2: 502 %-> retry", r.stderr)
      assert.are.equal("getIamPolicy: " .. why .. "\n", r.stdout)
      for _, req in ipairs(srv:requests()) do
        assert.is_nil(req.path:match(":setIamPolicy$"), "no write after a malformed read")
      end
    end)
  end
end)
