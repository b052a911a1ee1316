-- google.lua: what Google Cloud's retry pages share, for policies/gcs.lua,
-- policies/iam.lua and policies/memorystore.lua (one copy, here).
--
-- Source: the "Truncated exponential backoff" of Cloud Storage, IAM ("Retry
-- failed requests") and Memorystore ("Exponential backoff"), one formula:
-- wait min(2^n + random_number_milliseconds, maximum_backoff) before retry n
-- (n from 0), the random part up to 1000 ms and drawn anew for every retry:
-- jitter "additive", jitter_max = 1, cap_jitter = true (the jitter under the
-- cap, to the letter of the pages); maximum_backoff "typically 32 or 64
-- seconds", the policy's choice.
--
--   local google = require "google"
--   backoff = google.backoff(32)
--   function is_transient(status, body, info)
--     if status == 429 then return google.too_many_requests(info) end
--     ...
--   end
--
-- A module: it sets no globals.
local retry = require "retry"

local M = {}

--- The pages' backoff table, capped at `max` seconds.
function M.backoff(max)
  return { kind = "exponential", initial = 1, multiplier = 2, max = max,
           jitter = "additive", jitter_max = 1, cap_jitter = true }
end

--- A 429 (RESOURCE_EXHAUSTED, a quota) is retried after the backoff; when
--- its headers say when the quota comes back (info.rate_limit: the RateLimit
--- field, X-RateLimit-*), after that instant instead, spread by the jitter
--- and bounded by max_retry_after as a Retry-After is.
function M.too_many_requests(info)
  return retry.rate_limit_wait(info) or true
end

return M
