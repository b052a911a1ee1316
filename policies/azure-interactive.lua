-- policies/azure-interactive.lua: Azure's Retry pattern, for interactive work.
--
-- Sources: Azure Architecture Center, "Retry pattern": "in an interactive
-- web application accessing a remote service, it's better to fail after a
-- smaller number of retries with only a short delay between retry
-- attempts, and display a suitable message to the user (for example,
-- 'please try again later')"; the Azure SDKs' retry policies for the
-- servers' millisecond hints.  Faults are classified as in azure.lua
-- (lua/azure_faults.lua): cancel, retry at once, retry after a delay.
-- Tuning: 3 attempts in all, waits of 0.5 and 1 s (each spread by "equal"
-- jitter: 0.25-0.5 s, 0.5-1 s), 5 s for one attempt and never more than 10 s
-- for the whole call: a person is waiting.
-- A server that asks for more than 2 s (`Retry-After`, `retry-after-ms` or
-- `x-ms-retry-after-ms`) is not waited for: the call stops at once, to tell
-- the user.  (Retry-After stops it with the engine's verdict `deadline`,
-- exit 5; a millisecond hint, read by the script, with `final`, exit 1;
-- a rate-limit reset, with a hint or without, with `server_wait_too_long`.)

name = "azure-interactive"
max_attempts = 3
deadline = 10
attempt_timeout = 5
max_retry_after = 2
backoff = {
  kind = "exponential",
  initial = 0.5,
  multiplier = 2,
  max = 2,
  jitter = "equal",
}

local faults = require "azure_faults"
is_transient = faults.is_transient  -- bounded by max_retry_after

-- Throttling (a 429, or a 503 ServerBusy): its own budget cost; the Retry
-- pattern gives no other wait for it, so its backoff is the one above.
is_throttling = faults.is_throttling
throttle_backoff = { initial = 0.5, multiplier = 2, max = 2, jitter = "equal" }

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
-- 4 transient failures in a row (one more than a lone call can have) open it
-- for 30 s.  Off: --set breaker=none.
breaker = { failures = 4, open_seconds = 30 }
