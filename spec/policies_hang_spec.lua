-- Every shipped policy against a server that accepts and never answers:
-- the call ends within its deadline, through build/luaretry and real
-- sockets.  The deadline and attempt timeout are shortened with --set (the
-- shipped values, minutes, are checked in spec/policies_spec.lua), so the
-- whole file takes a few seconds.
local proc = require "support.proc"

local SHIPPED = { "http", "gcs", "iam", "memorystore", "azure", "azure-interactive", "azure-batch" }
-- seconds past the deadline for a late wake-up on a busy machine, on the
-- engine's own clock (from the call's start: process start-up is not in it)
local SLACK = 0.5

-- proc.run_timed, each run bounded at 10 s
local function run_timed(args) return proc.run_timed(args, { timeout = 10 }) end

describe("a silent server", function()
  local srv
  setup(function() srv = proc.server(proc.root .. "/spec/fixtures/t_silent.lua") end)
  teardown(function() if srv then srv:stop() end end)
  before_each(function() srv:reset() end)

  for _, name in ipairs(SHIPPED) do
    local file = proc.root .. "/policies/" .. name .. ".lua"

    it(name .. ".lua: attempts time out and the call stops within its deadline", function()
      local path = "/" .. name
      local r = run_timed({ "run", file, srv.base .. path, "--seed", "1",
                            "--set", "deadline=0.6", "--set", "attempt_timeout=0.15",
                            "--set", "backoff.initial=0.05", "--set", "backoff.jitter=none" })
      -- 5: the deadline; 4: a policy with few attempts used them all first
      assert.is_true(r.code == 5 or r.code == 4, "exit " .. r.code .. "\n" .. r.stderr)
      assert.is_true(r.elapsed < 0.6 + SLACK, "decided at " .. r.elapsed .. " s")
      assert.matches("timeout error", r.stderr)
      assert.is_true(#srv:requests_on(path) >= 2, r.stderr)  -- more than one attempt fit
    end)

    it(name .. ".lua: with its own attempt timeout, the deadline clips the attempt", function()
      local path = "/" .. name .. "-long"
      local r = run_timed({ "run", file, srv.base .. path, "--seed", "1", "--set", "deadline=0.4" })
      assert.are.equal(5, r.code, r.stderr)
      assert.is_true(r.elapsed > 0.3, "decided at only " .. r.elapsed .. " s")
      assert.is_true(r.elapsed < 0.4 + SLACK, "decided at " .. r.elapsed .. " s")
      assert.are.equal(1, #srv:requests_on(path))
    end)
  end
end)
