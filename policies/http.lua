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
-- a certificate or host name that does not verify (tls_verify): no retry
-- makes a bad certificate good, and retrying one only hides an attack or a
-- misconfiguration.  Nor a download that twice did not match the user's
-- --checksum (checksum_mismatch): the server serves something else; nor a
-- redirect loop or refused redirect, or a body above --max-filesize
-- (too_large): one list for every shipped policy, retry.final_error.
-- Rate limits: a 429, a 503 or a 403 whose headers say the quota is spent
-- (the IETF `RateLimit` field with r=0, or `X-RateLimit-Remaining: 0` with
-- `X-RateLimit-Reset`, as the engine reads them: info.rate_limit) waits
-- until the reset, spread upward by the jitter and bounded by
-- max_retry_after like a Retry-After (past it the call stops with
-- server_wait_too_long, exit 5).  A 403 with a Retry-After is a quota
-- answer too (GitHub's secondary limits); any other 403 is final.
-- Idempotency: GET, HEAD, OPTIONS, PUT and DELETE are repeated; a POST or
-- PATCH only when it carries an `Idempotency-Key` header (IETF draft-ietf-
-- httpapi-idempotency-key-header: the server applies each key once), sent
-- unchanged on every attempt.  More methods: `--set
-- options.idempotent_methods=LOCK,PROPFIND` (a list, commas or blanks).

name = "http"
max_attempts = 10
deadline = 300
connect_timeout, stall_timeout, stall_speed = 30, 30, 1
backoff = { kind = "exponential", initial = 1, multiplier = 2, max = 32,
            jitter = "additive", jitter_max = 1, cap_jitter = false }
options = {
  idempotent_methods = "", -- methods repeated besides GET, HEAD, OPTIONS, PUT, DELETE
}

-- Guards, shared by every call of this policy in a process (a fleet's with
-- --redis), tuned so that a lone call makes all its attempts while a batch
-- or a busy host cannot multiply an outage or hammer a limiter:
-- the retry budget (gRPC's 10 tokens, 0.1 back per success, retries while
-- more than half are left) with Finagle's floor of 0.1 retries a second (50 s
-- of them held at once: 5, enough for a lone call's last retries); and a
-- rate that starts unlimited and paces only once throttling answers (429)
-- come (AIMD).  A throttling answer costs the budget what a success gives
-- back (0.1, not AWS's 0.357): the rate's pacing answers it, and a limiter's
-- 429s must not spend the retries kept for an outage.  Off: --set
-- budget=none, --set rate=none.
budget = { max_tokens = 10, token_ratio = 0.1, reserve = 0.1,
           throttle_cost = 0.1 }
rate = { adaptive = true }

local retry = require "retry"
local transient_status = retry.status_in { 408, 429, 500, 502, 503, 504 }
local QUOTA = { [403] = true, [429] = true, [503] = true }

-- status 0: no response came (connect, timeout, reset, dns, tls, ...).
-- The body is not read: named _, the engine hands "" and copies none.
function is_transient(status, _, info)
  if status == 0 then
    return not retry.final_error(info.error)
  end
  if QUOTA[status] then
    local reset = retry.rate_limit_wait(info)
    if reset then return reset end
    if status == 403 then return info.retry_after ~= nil end
  end
  return transient_status(status)
end

function is_idempotent(request)
  local method = (request.method or (request.body and "POST" or "GET")):upper()
  if retry.method_in(method, "GET HEAD OPTIONS PUT DELETE", options.idempotent_methods) then
    return true
  end
  if method == "POST" or method == "PATCH" then
    -- an empty or blank key is no key (curl's -H 'Idempotency-Key;' sends one)
    local key = retry.header(request.headers, "idempotency-key")
    return type(key) == "string" and key:find("%S") ~= nil
  end
  return false
end
