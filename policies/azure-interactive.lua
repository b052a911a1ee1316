-- policies/azure-interactive.lua: Azure's Retry pattern, for interactive work.
--
-- Rule: the Retry pattern of the Azure Architecture Center (seeds/004):
-- "in an interactive web application accessing a remote service, it's better
-- to fail after a smaller number of retries with only a short delay between
-- retry attempts, and display a suitable message to the user (for example,
-- 'please try again later')".  Faults are classified as in azure.lua
-- (lua/azure_faults.lua): cancel, retry at once, retry after a delay.
-- Tuning: 3 attempts in all, waits of 0.5 and 1 s (each spread by "equal"
-- jitter: 0.25-0.5 s, 0.5-1 s), and never more than 10 s for the whole call.
-- A server that asks for more than 2 s (Retry-After) is not waited for: the
-- call stops at once, to tell the user.

name = "azure-interactive"
max_attempts = 3
deadline = 10
max_retry_after = 2
backoff = {
  kind = "exponential",
  initial = 0.5,
  multiplier = 2,
  max = 2,
  jitter = "equal",
}

local faults = require "azure_faults"

function is_transient(status, body, info)
  return faults.is_transient(status, body, info)
end
