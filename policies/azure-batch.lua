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
