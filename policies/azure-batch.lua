-- policies/azure-batch.lua: Azure's Retry pattern, for batch work.
--
-- Sources: Azure Architecture Center, "Retry pattern": "for a batch
-- application, it might be more appropriate to increase the number of retry
-- attempts with an exponentially increasing delay between attempts"; the
-- Azure SDKs' retry policies for the servers' millisecond hints.  Faults
-- are classified as in azure.lua (lua/azure_faults.lua): cancel, retry at
-- once, retry after a delay.
-- Tuning: 10 attempts in all; waits of 5, 10, 20, 40, 80 s, then 120 s (the
-- cap) for the last four retries: 635 s of waiting, each wait spread by
-- "equal" jitter between half and all of it.
-- Time: 100 s for one attempt (Azure Core's default network timeout per
-- try), 1800 s for the whole call: the whole schedule with every attempt
-- quick, or fewer attempts when they are slow; no one is waiting at a
-- screen, but a batch must still end.

name = "azure-batch"
max_attempts = 10
deadline = 1800
attempt_timeout = 100
backoff = {
  kind = "exponential",
  initial = 5,
  multiplier = 2,
  max = 120,
  jitter = "equal",
}

local faults = require "azure_faults"
is_transient = faults.is_transient  -- the classifier above

-- Throttling (a 429, or a 503 ServerBusy): its own budget cost; the Retry
-- pattern gives no other wait for it, so its backoff is the one above.
is_throttling = faults.is_throttling
throttle_backoff = { initial = 5, multiplier = 2, max = 120, jitter = "equal" }

-- Guards, shared by every call of this policy in a process (a fleet's with
-- --redis), tuned so that a lone call makes all its attempts while a batch
-- or a busy host cannot multiply an outage or hammer a limiter:
-- the retry budget (gRPC's 10 tokens, 0.1 back per success, retries while
-- more than half are left) with Finagle's floor of 0.1 retries a second (50 s
-- of them held at once: 5, enough for a lone call's last retries); and a
-- rate that starts unlimited and paces only once throttling answers (429,
-- or a 503 ServerBusy) come (AIMD).  A throttling answer costs the budget
-- what a success gives back (0.1, not AWS's 0.357): the rate's pacing
-- answers it, and a limiter's 429s must not spend the retries kept for an
-- outage.  Off: --set budget=none, --set rate=none.
budget = { max_tokens = 10, token_ratio = 0.1, reserve = 0.1,
           throttle_cost = 0.1 }
rate = { adaptive = true }
-- The Retry pattern advises a circuit breaker against long-lasting faults:
-- 11 transient failures in a row (one more than a lone call can have) open it
-- for 30 s.  Off: --set breaker=none.
breaker = { failures = 11, open_seconds = 30 }
