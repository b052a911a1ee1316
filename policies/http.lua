-- policies/http.lua: the default HTTP policy.
--
-- Truncated exponential backoff as Google Cloud documents it (1 s doubling,
-- capped at 32 s, up to 1 s of random extra per retry), jitter added after
-- the cap (cap_jitter = false) so clients that reach it together still
-- spread out.  Ten attempts, five minutes for the call; an attempt is bounded
-- by stalling, not by its length (30 s to connect, 30 s below 1 byte/s:
-- "stalled"), so a download that keeps moving is never cut but by the
-- deadline, and one that breaks is resumed (Range) where the server allows.
--
-- Transient: 408, 429, 500, 502, 503, 504 and every transport failure but
-- tls_verify (a certificate or host name that does not verify): no retry
-- makes a bad certificate good; retrying one only hides an attack.
name = "http"
max_attempts = 10
deadline = 300
connect_timeout, stall_timeout, stall_speed = 30, 30, 1
backoff = { kind = "exponential", initial = 1, multiplier = 2, max = 32,
            jitter = "additive", jitter_max = 1, cap_jitter = false }

local retry = require "retry"
local transient_status = retry.status_in { 408, 429, 500, 502, 503, 504 }

-- status 0: no response came (connect, timeout, reset, dns, tls, ...)
function is_transient(status, body, info)
  if status == 0 then return info.error ~= "tls_verify" end
  return transient_status(status)
end
