-- policies/azure-batch.lua: Azure's Retry pattern, for batch work.
--
-- Rule: the Retry pattern of the Azure Architecture Center (seeds/004):
-- "for a batch application, it might be more appropriate to increase the
-- number of retry attempts with an exponentially increasing delay between
-- attempts".  Faults are classified as in azure.lua (lua/azure_faults.lua):
-- cancel, retry at once, retry after a delay.
-- Tuning: 10 attempts in all; waits of 5, 10, 20, 40, 80 s, then 120 s (the
-- cap) for the last four retries: 635 s of waiting, each wait spread by
-- "equal" jitter between half and all of it.

name = "azure-batch"
max_attempts = 10
backoff = {
  kind = "exponential",
  initial = 5,
  multiplier = 2,
  max = 120,
  jitter = "equal",
}

local faults = require "azure_faults"

function is_transient(status, body, info)
  return faults.is_transient(status, body, info)
end
