-- Every shipped policy against a server that accepts and never answers:
-- the call ends within its deadline, through build/luaretry and real
-- sockets.  The deadline and attempt timeout are shortened with --set (the
-- shipped values, minutes, are checked in spec/policies_spec.lua), so the
-- whole file takes a few seconds.
local proc = require "support.proc"

local SHIPPED = { "http", "gcs", "iam", "memorystore", "azure", "azure-interactive", "azure-batch" }
local SLACK = 1.5   -- seconds past the deadline for process start and exit on a busy machine

describe("a silent server", function()
  local srv
  setup(function() srv = proc.server(proc.root .. "/spec/fixtures/t_silent.lua") end)
  teardown(function() if srv then srv:stop() end end)
  before_each(function() srv:reset() end)

  for _, name in ipairs(SHIPPED) do
    local file = proc.root .. "/policies/" .. name .. ".lua"

    it(name .. ".lua: attempts time out and the call stops within its deadline", function()
      local path = "/" .. name
      local r = proc.run({ "run", file, srv.base .. path, "--seed", "1",
                           "--set", "deadline=0.6", "--set", "attempt_timeout=0.15",
                           "--set", "backoff.initial=0.05", "--set", "backoff.jitter=none" },
                         { timeout = 10 })
      -- 5: the deadline; 4: a policy with few attempts used them all first
      assert.is_true(r.code == 5 or r.code == 4, "exit " .. r.code .. "\n" .. r.stderr)
      assert.is_true(r.secs < 0.6 + SLACK, "took " .. r.secs .. " s")
      assert.matches("timeout error", r.stderr)
      assert.is_true(#srv:requests_on(path) >= 2, r.stderr)  -- more than one attempt fit
    end)

    it(name .. ".lua: with its own attempt timeout, the deadline clips the attempt", function()
      local path = "/" .. name .. "-long"
      local r = proc.run({ "run", file, srv.base .. path, "--seed", "1", "--set", "deadline=0.4" },
                         { timeout = 10 })
      assert.are.equal(5, r.code, r.stderr)
      assert.is_true(r.secs > 0.3, "took only " .. r.secs .. " s")
      assert.is_true(r.secs < 0.4 + SLACK, "took " .. r.secs .. " s")
      assert.are.equal(1, #srv:requests_on(path))
    end)
  end
end)
