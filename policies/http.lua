-- policies/http.lua: the default HTTP policy.
--
-- Truncated exponential backoff as Google Cloud documents it (1 s doubling,
-- capped at 32 s, up to 1 s of random extra per retry), with the jitter
-- added after the cap (cap_jitter = false) so that clients which reach the
-- cap together still spread out.  Ten attempts in all, 30 s for one attempt
-- and five minutes for the whole call: a server that accepts and never
-- answers cannot hold it for ever.
-- Transient: 408, 429, 500, 502, 503, 504 and every transport failure but
-- a certificate or host name that does not verify (tls_verify): no retry
-- makes a bad certificate good, and retrying one only hides an attack or a
-- misconfiguration.

name = "http"
max_attempts = 10
deadline = 300
attempt_timeout = 30
backoff = { kind = "exponential", initial = 1, multiplier = 2, max = 32,
            jitter = "additive", jitter_max = 1, cap_jitter = false }

local retry = require "retry"
local transient_status = retry.status_in { 408, 429, 500, 502, 503, 504 }

-- status 0: no response came (connect, timeout, reset, dns, tls, ...)
function is_transient(status, body, info)
  if status == 0 then return info.error ~= "tls_verify" and info.error ~= "too_many_redirects" end
  return transient_status(status)
end
