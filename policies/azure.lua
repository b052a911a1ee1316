-- policies/azure.lua: Azure's Retry pattern, general tuning.
--
-- Rule: the Retry pattern of the Azure Architecture Center (seeds/004,
-- German and English) answers each fault one of three ways; the classifier
-- is lua/azure_faults.lua, shared with azure-interactive.lua and
-- azure-batch.lua:
--   - cancel (final): faults that are not transient or will not succeed if
--     repeated, "an authentication failure caused by providing invalid
--     credentials": 400, 401, 403, 404, 409, 501 and every status not below;
--   - retry at once (is_transient returns 0): an unusual, rare fault, such as
--     a corrupted packet: a connection reset, the first time in a call;
--   - retry after a delay "increased incrementally or exponentially": the
--     commonplace busy and connectivity faults: 408 and other timeouts, 429,
--     500, 502, 503, 504, and every other transport failure.
-- Tuning: the pattern's own example ("retryCount = 3", "delay = 5 s", and
-- "consider calculating an exponential delay here"), made exponential:
-- 4 attempts in all, waits of 5, 10 and 20 s.  The waits are spread with
-- "equal" jitter (half the delay fixed, half random) so that "requests from
-- multiple instances of the application" spread "as evenly as possible":
-- 2.5-5 s, 5-10 s, 10-20 s.
--
-- Only idempotent operations are repeated after they may have taken effect
-- (the engine's rule: GET, HEAD, OPTIONS, PUT, DELETE).  The pattern advises
-- a circuit breaker against long-lasting faults: add one with
-- `--set breaker.failures=5` (or a `breaker` table in a copy of this file).

name = "azure"
max_attempts = 4
backoff = {
  kind = "exponential",
  initial = 5,
  multiplier = 2,
  max = 60,
  jitter = "equal",
}

local faults = require "azure_faults"

function is_transient(status, body, info)
  return faults.is_transient(status, body, info)
end
