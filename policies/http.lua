-- policies/http.lua: the default HTTP policy.
--
-- Truncated exponential backoff as Google Cloud documents it (1 s doubling,
-- capped at 32 s, up to 1 s of random extra per retry), with the jitter
-- added after the cap (cap_jitter = false) so that clients which reach the
-- cap together still spread out.  Ten attempts in all, five minutes at most.
-- Transient: 408, 429, 500, 502, 503, 504 and every transport failure.

name = "http"
max_attempts = 10
deadline = 300
backoff = {
  kind = "exponential",
  initial = 1,
  multiplier = 2,
  max = 32,
  jitter = "additive",
  jitter_max = 1,
  cap_jitter = false,
}

local retry = require "retry"
local transient_status = retry.status_in { 408, 429, 500, 502, 503, 504 }

function is_transient(status, body, info)
  if status == 0 then return true end  -- no response: connect, timeout, reset, dns, tls
  return transient_status(status)
end
