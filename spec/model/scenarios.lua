-- spec/model/scenarios.lua: random policies and outcomes for the
-- differential test of the guards (spec/c/test_guard_model.c beside
-- spec/model/guards.lua).  math.random is seeded by the driver: a seed
-- gives the same scenarios on every machine.
local S = {}

local function pick(t) return t[math.random(#t)] end
local function between(lo, hi) return lo + (hi - lo) * math.random() end

-- A policy's text, and the settings the model is given.
function S.policy()
  local s = {
    max_attempts = math.random(1, 6),
    deadline = between(0.3, 6),
    max_retry_after = 2,
    backoff = { initial = between(0.01, 0.5), multiplier = 2, max = 2, jitter_max = 0.1 },
    throttle_backoff = { initial = between(0.02, 0.3), multiplier = 2, max = 1 },
  }
  local text = {
    ("max_attempts = %d"):format(s.max_attempts),
    ("deadline = %.17g"):format(s.deadline),
    "attempt_timeout = 2",
    "max_retry_after = 2",
    ("backoff = { initial = %.17g, multiplier = 2, max = 2, jitter = 'full', jitter_max = 0.1 }")
      :format(s.backoff.initial),
    ("throttle_backoff = { initial = %.17g, multiplier = 2, max = 1, jitter = 'full' }")
      :format(s.throttle_backoff.initial),
  }
  local function add(fmt, ...) text[#text + 1] = fmt:format(...) end
  if math.random() < 0.5 then
    s.budget = { max_tokens = math.random(2, 10), token_ratio = pick { 0.1, 0.5, 1 }, throttle_cost = 0.357 }
    add("budget = { max_tokens = %d, token_ratio = %g }", s.budget.max_tokens, s.budget.token_ratio)
  end
  if math.random() < 0.5 then
    s.breaker = { failures = math.random(1, 4), open_seconds = between(0.2, 3), probes = math.random(1, 3) }
    add("breaker = { failures = %d, open_seconds = %.17g, probes = %d }", s.breaker.failures,
        s.breaker.open_seconds, s.breaker.probes)
  end
  if math.random() < 0.3 then
    s.throttle = { k = pick { 1.2, 1.5, 2 } }
    add("throttle = { k = %g, window = 600 }", s.throttle.k)
  end
  if math.random() < 0.4 then
    s.rate = { limit = math.random(1, 20), burst = math.random(1, 3) }
    add("rate = { limit = %d, burst = %d }", s.rate.limit, s.rate.burst)
  end
  if math.random() < 0.5 then
    local max, share = math.random(1, 2), pick { 0.1, 0.5, 1 }
    add("hedge = { delay = %.17g, max = %d, share = %g }", between(0.02, 0.3), max, share)
    if s.max_attempts > 1 then s.hedge = { share = share } end -- else clamped to none
  end
  return table.concat(text, "\n") .. "\n", s
end

-- An attempt's answer: its status, its latency, and a Retry-After (< 0: none).
function S.outcome()
  local x = math.random()
  local status = x < 0.4 and 200 or x < 0.75 and 503 or x < 0.9 and 429 or 404
  local retry_after = (status == 429 or status == 503) and math.random() < 0.3 and between(0, 2.5) or -1
  return status, between(0.001, 0.6), retry_after
end

function S.calls() return math.random(1, 6) end

return S
