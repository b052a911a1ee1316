-- policies/azure.lua: Azure's Retry pattern, general tuning.
--
-- Sources: Azure Architecture Center, "Retry pattern"; the Azure SDKs'
-- retry policies (Azure Core) for the servers' millisecond hints.  The
-- classifier is lua/azure_faults.lua, shared with azure-interactive.lua and
-- azure-batch.lua; it answers each fault one of the pattern's three ways:
--   - cancel (final): faults that are not transient or will not succeed if
--     repeated, "an authentication failure caused by providing invalid
--     credentials": 400, 401, 403, 404, 409, 501, every status not below,
--     and a certificate or host name that does not verify (tls_verify);
--   - retry at once (is_transient returns 0): an unusual, rare fault, such as
--     a corrupted packet: a connection reset, the first time in a call;
--   - retry after a delay "increased incrementally or exponentially": the
--     commonplace busy and connectivity faults: 408 and other timeouts, 429,
--     500, 502, 503, 504, and every other transport failure.  A server's
--     `retry-after-ms` or `x-ms-retry-after-ms` (read as the Azure SDKs read
--     them, before `Retry-After`) sets the wait instead of the backoff.
-- Tuning: the pattern's own example ("retryCount = 3", "delay = 5 s", and
-- "consider calculating an exponential delay here"), made exponential:
-- 4 attempts in all, waits of 5, 10 and 20 s.  The waits are spread with
-- "equal" jitter (half the delay fixed, half random) so that "requests from
-- multiple instances of the application" spread "as evenly as possible":
-- 2.5-5 s, 5-10 s, 10-20 s.
-- Time: 30 s for one attempt and 120 s for the whole call.  The pattern
-- asks to tune both to the business need and warns that a long-blocked
-- operation "can hold critical resources"; 120 s holds the whole schedule
-- (35 s of waits at most) and three full-length attempts, and the SDKs'
-- defaults lie either side of it (Azure Core's 100 s network timeout per
-- try, a few retries).  Nothing waits for ever on a silent server.
--
-- Only idempotent operations are repeated after they may have taken effect
-- (the engine's rule: GET, HEAD, OPTIONS, PUT, DELETE).  The pattern advises
-- a circuit breaker against long-lasting faults: one is on (the guards,
-- below).

name = "azure"
max_attempts = 4
deadline = 120
attempt_timeout = 30
backoff = {
  kind = "exponential",
  initial = 5,
  multiplier = 2,
  max = 60,
  jitter = "equal",
}

local faults = require "azure_faults"
is_transient = faults.is_transient  -- the classifier above

-- Throttling (a 429, or a 503 ServerBusy): its own budget cost; the Retry
-- pattern gives no other wait for it, so its backoff is the one above.
is_throttling = faults.is_throttling
throttle_backoff = { initial = 5, multiplier = 2, max = 60, jitter = "equal" }

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
-- 5 transient failures in a row (one more than a lone call can have) open it
-- for 30 s.  Off: --set breaker=none.
breaker = { failures = 5, open_seconds = 30 }
