-- policies/memorystore.lua: Google Cloud Memorystore for Redis.
--
-- Source: Memorystore for Redis, "Exponential backoff" (read in its German
-- translation, "Exponentielle Backoffs", with the English original):
--   - retry every request answered with a 5xx or 429 ("HTTP-5xx- und
--     429-Antwortcodefehler"), and transport failures (status 0), where no
--     answer came at all; but not a certificate or host name that does not
--     verify (tls_verify): the page's algorithm is for failures that pass,
--     and a retry cannot make a certificate valid;
--   - wait min(2^n + random_number_milliseconds, maximum_backoff) before
--     retry n (n from 0), the random part up to 1000 ms and drawn anew for
--     every retry: jitter "additive", jitter_max = 1, cap_jitter = true.
--     (The German text says "größer oder gleich 1.000", at least 1000 ms, a
--     slip of the translation: the English original, as on the Cloud
--     Storage page, says at most 1000 ms; we follow the original.)
--   - maximum_backoff "normalerweise 32 oder 64 Sekunden": 64 here;
--   - once at maximum_backoff, keep retrying at that interval "up to a
--     maximum number of retries", and "not indefinitely": 12 attempts in all,
--     so 11 retries: six on the way up (1, 2, 4, 8, 16, 32 s, each + up to
--     1 s), then five at the cap (64 s each): 383 s of waiting without jitter,
--     at most 389 s with it.
--     Mobile clients may need more: `--set max_attempts=N`.
-- Time (the page names none): 30 s for one attempt, an API call that
-- answers in well under a second when the service is well; 600 s for the
-- whole call, which holds the whole 389 s schedule with quick attempts and
-- stops a call whose attempts hang.
-- Everything else (400, 401, 403, 404, 408, 409, ...) is final.  When the
-- retries are exhausted the call stops with verdict "exhausted" (exit
-- status 4 on the command line), to be reported or logged.

name = "memorystore"
max_attempts = 12
deadline = 600
attempt_timeout = 30
local google = require "google"
local retry = require "retry"
backoff = google.backoff(64)  -- the formula shared with gcs.lua and iam.lua

function is_transient(status, _, info) -- the body is not read: none is copied
  if status == 0 then return not retry.final_error(info.error) end  -- connect, timeout, reset, dns, tls
  if status == 429 then return google.too_many_requests(info) end  -- a rate-limit reset counts
  return status >= 500 and status <= 599
end

-- Throttling: the engine's rule classes a 429 as throttling (its own budget
-- cost); Google's backoff page gives one formula for 429 and 5xx alike, so
-- the throttling backoff is the one above.
throttle_backoff = { initial = 1, multiplier = 2, max = 64, jitter = "additive", jitter_max = 1,
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
-- 14 tokens, not 10: this policy's 12 attempts (6 retries from the tokens,
-- 5 from the reserve) all fit a lone call even with no wait between them.
budget = { max_tokens = 14, token_ratio = 0.1, reserve = 0.1,
           throttle_cost = 0.1 }
rate = { adaptive = true }
