-- policies/iam.lua: Google Cloud Identity and Access Management (IAM).
--
-- Source: IAM, "Retry failed requests" (read in its German and Korean
-- translations, each with the English original): truncated exponential
-- backoff with jitter:
--   - retry 500, 502, 503 and 504;
--   - 429 too.  The sources disagree here: the page's list names only the
--     four 5xx codes, but its own reason for backing off is that quick
--     retries "might exceed quotas and limits", and an exceeded quota is
--     what a 429 (RESOURCE_EXHAUSTED) says.  We retry it, with the same
--     backoff: stopping at the first 429 would give up exactly where the
--     page's backoff is meant to help, and a Retry-After on it is honoured.
--   - 404 only when options.retry_404 is on (`--set options.retry_404=true`):
--     "IAM reads are eventually consistent", so a resource may not be visible
--     right after it was created; off by default, as the page calls it
--     optional;
--   - 409 with the status ABORTED (a concurrency conflict, read from the
--     response body) only inside a `run` workflow (info.workflow): "retry the
--     entire read-modify-write series of requests ... If you retry only the
--     write operation, the request will continue to fail";
--   - transport failures (status 0), where no answer came at all: the
--     algorithm retries whenever "the request fails"; the engine still
--     refuses to repeat a non-idempotent request that may have taken effect.
--     Not a certificate or host name that does not verify (tls_verify):
--     that failure does not pass, and retrying it only hides it;
--   - wait min(2^n + random_fraction, maximum_backoff), n from 0,
--     random_fraction <= 1 s and new for every retry: jitter "additive",
--     jitter_max = 1, cap_jitter = true;
--   - maximum_backoff "typically 32 or 64 seconds": 32 here,
--     `--set backoff.max=64` for 64;
--   - "after deadline seconds, stop retrying": 300 s, the page's CI/CD
--     example.  No attempt limit: the deadline is the stop rule (13 retries
--     fit in it when attempts are quick).  One attempt may take 30 s: an
--     IAM call answers in well under that, and a silent server then costs a
--     retry, not the whole deadline.
-- Everything else (400, 401, 403, 408, other 409s, 501, ...) is final.
--
-- Workflows: a script that does `require "iam"` gets this classification and
-- tuning, and adds its own run(http, args).

name = "iam"
deadline = 300
attempt_timeout = 30
local google = require "google"
backoff = google.backoff(32)  -- the formula shared with gcs.lua and memorystore.lua
options = {
  retry_404 = false,  -- retry 404s: IAM reads are eventually consistent
}

local retry = require "retry"
local server_error = retry.status_in { 500, 502, 503, 504 }

-- The status of a Google API error body: {"error": {..., "status": "ABORTED"}}.
-- Google puts "message" before "status", so a long message pushes the
-- status past the first 4 KiB: the last 4 KiB are read too.  Each window is
-- bounded: the pattern cannot run away.
local ABORTED = '"status"%s*:%s*"ABORTED"'
local function aborted(body)
  return retry.matches(body, ABORTED) ~= nil or retry.matches_end(body, ABORTED) ~= nil
end

function is_transient(status, body, info)
  if status == 0 then return not retry.final_error(info.error) end  -- connect, timeout, reset, dns, tls
  if status == 404 then return options.retry_404 == true end
  if status == 409 then return info.workflow == true and aborted(body) end
  if status == 429 then return google.too_many_requests(info) end  -- a rate-limit reset counts
  return server_error(status)
end

-- Throttling: the engine's rule classes a 429 as throttling (its own budget
-- cost); Google's backoff page gives one formula for 429 and 5xx alike, so
-- the throttling backoff is the one above.
throttle_backoff = { initial = 1, multiplier = 2, max = 32, jitter = "additive", jitter_max = 1,
                     cap_jitter = true }

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
