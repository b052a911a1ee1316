-- A workflow's requests pass the guards (luaretry-policy(5), ONE ATTEMPT,
-- EVERY GUARD, row "request"): each waits for its rate token and is
-- counted by admission, while max_attempts counts the workflow's rounds;
-- a request the guards refuse ends the workflow's call with that verdict.
-- End to end through the CLI, libcurl and the fault server.
local proc = require "support.proc"

local HERE = proc.root .. "/spec/fixtures/workflow_guards/"

describe("a workflow's requests and the guards", function ()
  local srv
  proc.with_server(HERE .. "server.lua", function (s) srv = s end)

  local function run(args) return proc.run(args, { timeout = 60 }) end

  -- The most requests the server saw within any `window` seconds.
  local function densest(seen, window)
    local most = 0
    for i = 1, #seen do
      local n = 0
      for j = i, #seen do
        if seen[j].time - seen[i].time < window then n = n + 1 end
      end
      most = math.max(most, n)
    end
    return most
  end

  it("paces every request of every round at the rate (20 a second, burst 1)", function ()
    local r = run({ "run", HERE .. "paced.lua", srv.base, "5" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("again\n", r.stdout)
    -- max_attempts counts rounds: two rounds ran, each of 6 requests
    assert.matches("attempt 1/3: 503 %-> retry", r.stderr)
    assert.matches("attempt 2/3: 200 %-> success", r.stderr)
    local seen = srv:requests()
    assert.are.equal(12, #seen)
    -- 12 tokens at 20 a second take 0.55 s at least, however slow the
    -- machine (it can only space them further)
    local spread = seen[#seen].time - seen[1].time
    assert.is_true(spread >= 0.5, ("12 requests over %.3f s"):format(spread))
    -- and no half second held more than its 10 tokens and the burst's
    -- (one more for a request whose arrival was delayed behind the next)
    local most = densest(seen, 0.5)
    assert.is_true(most <= 12, most .. " requests within 0.5 s")
  end)

  it("a request whose token comes past the deadline is not sent: the workflow stops (rate_limit)", function ()
    local r = run({ "run", HERE .. "late.lua", srv.base })
    assert.are.equal(6, r.code, r.stderr)
    assert.matches("rate_limit", r.stderr)
    assert.matches("a request of the workflow: the rate limiter's next token", r.stderr)
    assert.are.equal(1, #srv:requests_on("/ok"))
    assert.are.equal("", r.stdout)
  end)

  it("a request admission refuses is not sent: the workflow stops (admission)", function ()
    local r = run({ "run", HERE .. "admitted.lua", srv.base })
    assert.are.equal(6, r.code, r.stderr)
    assert.matches("admission", r.stderr)
    assert.matches("a request of the workflow: admission control refuses", r.stderr)
    local sent = #srv:requests_on("/busy")
    assert.is_true(sent >= 1 and sent < 30, sent .. " requests sent")
  end)
end)
