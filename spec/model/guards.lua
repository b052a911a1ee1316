-- spec/model/guards.lua: a reference model of "One attempt, every guard"
-- (luaretry-policy(5)), small enough to read in one sitting, run beside
-- the engine by spec/c/test_guard_model.c over random calls on the
-- virtual clock.  It keeps the guards' state as the table says and checks
-- each of the engine's decisions against it: what it must do, what it
-- must not do, and, where the engine draws at random (jitter, admission's
-- probability) or a time lies within EPS of a boundary (each call's guard
-- clock starts at its own real start, microseconds apart), the bounds
-- within which either answer is right; then it follows the engine.
--
-- Guards modelled: max_attempts, deadline, breaker (failures, open_seconds,
-- probes), admission (the SRE formula), budget (milli-tokens), hedging's
-- bound (credit), a fixed rate limiter (GCRA); backoff and the throttling
-- backoff with full jitter, Retry-After.  Not modelled: the breaker's rate
-- window, an adaptive rate, header pacing, the fleet, scripts (so no
-- workflow's requests: spec/workflow_guards_spec.lua checks that row).
local M = {}
M.__index = M

-- Each call's guard clock starts at the real time it began (the driver
-- says when, from the scenario's first call: `origin`), so guard times are
-- known to within the time a begin takes, and waits to within float error.
-- A begin the machine preempted takes longer: the driver says the longest
-- in the scenario (`slack`), and the bounds widen by it.
local BASE_EPS = 5e-3
local EPS = BASE_EPS
-- No attempt starts in the deadline's last millisecond (the table's
-- "start" cell): the latest an attempt may start, of a deadline.
local function latest_start(deadline) return deadline - 1e-3 end

-- s: the settings the driver wrote into the policy (nil: guard off)
function M.new(s)
  local m = setmetatable({ s = s }, M)
  m.tokens = s.budget and math.floor(s.budget.max_tokens * 1000 + 0.5)
  m.breaker = "closed"; m.failures = 0; m.opened = 0; m.probes_left = 0
  m.requests = 0; m.accepts = 0
  m.credit = 10000
  m.tat = -1e9
  return m
end

local function fail(fmt, ...) error(string.format(fmt, ...), 0) end

-- A verdict the engine's answer settles: "yes", "no" or "either".
local function settle(model, engine_yes, what)
  if model == "either" then return engine_yes end
  local yes = model == "yes"
  if yes ~= engine_yes then
    fail("%s: the model says %s, the engine %s", what, model, engine_yes and "yes" or "no")
  end
  return yes
end

-- ---- the guards, each asked for an attempt of `kind` at time `now`

function M:breaker_ask(now, engine_yes)
  local b = self.s.breaker
  if not b then return true end
  if self.breaker == "open" then
    local since = now - self.opened - b.open_seconds
    local v = since < -EPS and "no" or since >= EPS and "yes" or "either"
    if not settle(v, engine_yes, "breaker open -> half-open") then return false end
    self.breaker = "half_open"; self.probes_left = b.probes; self.opened = now
  end
  if self.breaker == "half_open" then
    if self.probes_left > 0 then
      self.probes_left = self.probes_left - 1; self.permit = true; return settle("yes", engine_yes, "a probe permit")
    end
    local since = now - self.opened - b.open_seconds
    local v = since < -EPS and "no" or since >= EPS and "yes" or "either"
    if not settle(v, engine_yes, "half-open, permits out") then return false end
    self.opened = now; self.probes_left = b.probes - 1; self.permit = true
    return true
  end
  return settle("yes", engine_yes, "breaker closed")
end

function M:give_back_permit()
  if self.permit and self.breaker == "half_open" and self.probes_left < self.s.breaker.probes then
    self.probes_left = self.probes_left + 1
  end
  self.permit = false
end

function M:admission_ask(engine_yes)
  local t = self.s.throttle
  if not t then return true end
  local r = math.max(0, (self.requests - t.k * self.accepts) / (self.requests + 1))
  self.requests = self.requests + 1
  local yes = settle(r == 0 and "yes" or "either", engine_yes, "admission")
  self.counted = yes
  return yes
end

function M:uncount()
  if self.counted and self.requests > 0 then self.requests = self.requests - 1 end
  self.counted = false
end

function M:budget_allows()
  local b = self.s.budget
  return not b or self.tokens * 2 > math.floor(b.max_tokens * 1000 + 0.5)
end

-- the rate limiter: the time its next token is free
function M:token_free()
  local r = self.s.rate
  return self.tat - (r.burst - 1) / r.limit
end

function M:take_token(start)
  self.tat = math.max(self.tat, start) + 1 / self.s.rate.limit
end

-- ---- a call's life; `e` is what the engine did

function M:begin(e, origin, slack)
  self.origin = origin
  EPS = BASE_EPS + (slack or 0)
  self.started, self.attempts, self.in_flight, self.hedges = 0, 0, {}, 0
  self.permit, self.counted, self.reserved, self.closed = false, false, false, false
  self.round_after, self.round_throttled = nil, nil -- a round's answers, kept for its last
  local why = e.reason -- "none": the call may go
  if not self:breaker_ask(0, why ~= "circuit_open") then return end
  if not self:admission_ask(why ~= "throttle") then self:give_back_permit(); return end
  if why ~= "none" then fail("begin: the engine stopped (%s), the model goes on", why) end
  if self.s.hedge then self.credit = math.min(10000, self.credit + math.floor(self.s.hedge.share * 1000 + 0.5)) end
end

-- luaretry_call_next as the attempt goes: a token not reserved yet is
-- taken (waited for); one reserved is waited for until its time
function M:next(now, e)
  local g = now + (self.origin or 0)
  if not self.s.rate or self.reserved then
    local want = self.reserved and math.max(0, self.reserved - g) or 0
    if math.abs(e.wait - want) > EPS then fail("next at %.4f: waits %.4f, the model %.4f", now, e.wait, want) end
    return
  end
  local start = math.max(self:token_free(), g)
  local latest = self.s.deadline and self.origin + latest_start(self.s.deadline) or math.huge
  local v = start > latest + EPS and "no" or start < latest - EPS and "yes" or "either"
  if not settle(v, e.reason ~= "rate_limit", "the first token before the deadline") then
    self:give_back_permit(); self:uncount()
    return
  end
  if e.reason ~= "none" then fail("next at %.4f: the engine stops (%s)", now, e.reason) end
  if math.abs(e.wait - (start - g)) > EPS then
    fail("next at %.4f: the token in %.4f, the engine waits %.4f", now, start - g, e.wait)
  end
  self:take_token(start)
  self.reserved = start
end

function M:start(now)
  self.started = self.started + 1
  self.in_flight[self.started] = now
  self.last_start = now
  self.permit, self.counted, self.closed, self.reserved = false, false, false, false
  return self.started
end

-- a hedge due at `now`; e.hedged, e.why (the engine's message when not)
function M:hedge(now, e)
  local s, why = self.s, e.why or ""
  local function engine_let(word) return e.hedged or not why:find(word, 1, true) end
  local function ok(word, v) return settle(v, engine_let(word), "hedge: " .. word) end
  local function back() self:give_back_permit(); self:uncount() end
  if s.max_attempts and not ok("max_attempts", self.started < s.max_attempts and "yes" or "no") then return end
  if s.deadline and not ok("deadline", now < latest_start(s.deadline) - EPS and "yes"
                            or now >= latest_start(s.deadline) + EPS and "no" or "either") then return end
  local g = now + self.origin
  if not self:breaker_ask(g, engine_let("circuit")) then return end
  if not self:admission_ask(engine_let("admission") and engine_let("throttle")) then self:give_back_permit(); return end
  if s.budget and not ok("budget", self:budget_allows() and "yes" or "no") then back(); return end
  local bound = s.hedge and s.hedge.share < 1 -- share 1: no bound
  if bound and not ok("bound", self.credit >= 1000 and "yes" or "no") then back(); return end
  if bound then self.credit = self.credit - 1000 end
  if s.rate then
    local free = self:token_free()
    if not ok("rate limiter", free > g + EPS and "no" or free < g - EPS and "yes" or "either") then
      if bound then self.credit = self.credit + 1000 end
      back(); return
    end
    self:take_token(g)
  end
  if not e.hedged then fail("hedge at %.4f: the model sends it, the engine says: %s", now, why) end
  self.hedges = self.hedges + 1
  self.started = self.started + 1
  self.in_flight[self.started] = now
  self.last_start = now
  self.permit, self.counted = false, false
end

-- ---- outcomes: cls "success", "final", "failure" or "throttled"

function M:record(cls, now)
  local b, bud = self.s.breaker, self.s.budget
  if b then
    if cls == "success" or cls == "final" then
      self.failures = 0
      if self.breaker == "half_open" then self.breaker = "closed" end
    elseif cls == "failure" then
      self.failures = self.failures + 1
      if self.breaker == "half_open" then self.breaker = "open"; self.opened = now
      elseif self.breaker == "closed" and self.failures >= b.failures then
        self.breaker = "open"; self.opened = now
      end
    elseif self.breaker == "half_open" and self.probes_left < b.probes then
      self.probes_left = self.probes_left + 1 -- throttling: neutral, its permit back
    end
  end
  if self.s.throttle and (cls == "success" or cls == "final") then self.accepts = self.accepts + 1 end
  if bud then
    local max = math.floor(bud.max_tokens * 1000 + 0.5)
    local d = cls == "success" and math.floor(bud.token_ratio * 1000 + 0.5)
      or cls == "failure" and -1000
      or cls == "throttled" and -math.floor((bud.throttle_cost or 0.357) * 1000 + 0.5) or 0
    self.tokens = math.max(0, math.min(max, self.tokens + d))
  end
end

-- The wait a transient outcome earns: its bounds [lo, hi].
function M:wait_bounds(cls, retry_after)
  local s, n = self.s, self.attempts - 1
  local b = cls == "throttled" and s.throttle_backoff or s.backoff
  local cap = math.min(b.initial * b.multiplier ^ n, b.max)
  local lo, hi = 0, cap
  if retry_after >= 0 then
    lo, hi = math.max(lo, retry_after), math.max(hi, retry_after + s.backoff.jitter_max)
  end
  return lo, hi
end

-- attempt `id` answered `cls` at `now`; e: retry, reason, wait
function M:report(id, cls, retry_after, now, e)
  local s = self.s
  self.in_flight[id] = nil
  self.attempts = self.attempts + 1
  local g = now + self.origin
  self:record(cls, g)
  if cls == "success" or cls == "final" then
    local want = cls == "success" and "success" or "final"
    if e.reason ~= want then fail("report %s: the engine says %s", cls, e.reason) end
    return
  end
  if next(self.in_flight) then -- the others go on: no retry yet
    self.closed = true
    if e.retry or e.reason ~= "none" then fail("report with others in flight: %s", e.reason) end
    -- what it asked holds for the answer that decides the round
    self.round_after = math.max(self.round_after or -1, retry_after)
    self.round_throttled = self.round_throttled or cls == "throttled"
    return
  end
  retry_after = math.max(retry_after, self.round_after or -1)
  if self.round_throttled then cls = "throttled" end
  self.round_after, self.round_throttled = nil, nil
  if retry_after > s.max_retry_after then
    if e.reason ~= "server_wait_too_long" then fail("Retry-After %.3f: the engine says %s", retry_after, e.reason) end
    return
  end
  -- the chain for a retry starting after its wait
  local lo, hi = self:wait_bounds(cls, retry_after)
  local why = e.retry and "retry" or e.reason
  local function stop_here(reason, v) -- v: "yes" the guard lets it go
    local go = settle(v, why ~= reason, reason)
    return not go
  end
  if s.max_attempts and stop_here("exhausted", self.started < s.max_attempts and "yes" or "no") then return end
  if s.deadline then
    local latest = latest_start(s.deadline)
    local v = now + hi < latest - EPS and "yes" or now + lo >= latest + EPS and "no" or "either"
    if stop_here("deadline", v) then return end
  end
  if s.breaker and not self:breaker_ask(g, why ~= "circuit_open") then return end
  if s.throttle and not self:admission_ask(why ~= "throttle") then self:give_back_permit(); return end
  if s.budget and stop_here("budget", self:budget_allows() and "yes" or "no") then
    self:give_back_permit(); self:uncount(); return
  end
  if s.rate then
    local free = self:token_free()
    local latest = s.deadline and self.origin + latest_start(s.deadline) or math.huge
    local v = free > latest + EPS and "no" or (free + EPS < latest and g + hi < latest - EPS) and "yes" or "either"
    if stop_here(why == "deadline" and "deadline" or "rate_limit", v) then
      self:give_back_permit(); self:uncount(); return
    end
    if not e.retry then fail("the model retries, the engine stops (%s)", why) end
    -- reserved now when the token is not free at the retry's start
    if free > g + lo - EPS and math.abs(g + e.wait - free) < EPS then
      self:take_token(free); self.reserved = free
    elseif e.wait < lo - EPS or e.wait > math.max(hi, free - g) + EPS then
      fail("retry wait %.4f outside [%.4f, %.4f] (token free at %.4f)", e.wait, lo, hi, free - g)
    else
      self.reserved = false
    end
    return
  end
  if not e.retry then fail("the model retries after [%.4f, %.4f], the engine stops (%s)", lo, hi, why) end
  if e.wait < lo - EPS or e.wait > hi + EPS then
    fail("retry wait %.4f outside [%.4f, %.4f]", e.wait, lo, hi)
  end
end

-- After a call: the state the engine reports.
function M:check(budget_tokens, breaker)
  if self.s.budget and math.abs(budget_tokens - self.tokens / 1000) > 1e-9 then
    fail("budget: the engine has %.3f tokens, the model %.3f", budget_tokens, self.tokens / 1000)
  end
  if self.s.breaker and breaker ~= self.breaker then
    fail("breaker: the engine is %s, the model %s", breaker, self.breaker)
  end
end

return M
