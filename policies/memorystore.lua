-- policies/memorystore.lua: Google Cloud Memorystore for Redis.
--
-- Rule: exponential backoff, as "Google Cloud Memorystore for Redis:
-- exponential backoff" (seeds/002, German) gives it:
--   - retry every request answered with a 5xx or 429 ("HTTP-5xx- und
--     429-Antwortcodefehler"), and transport failures (status 0), where no
--     answer came at all;
--   - wait min(2^n + random_number_milliseconds, maximum_backoff), the random
--     part up to 1000 ms and drawn anew for every retry: jitter "additive",
--     jitter_max = 1, cap_jitter = true.  (The German text says "größer oder
--     gleich 1.000", at least 1000 ms, a slip of the translation: the English
--     original, as on the Cloud Storage page, says at most 1000 ms.)
--   - maximum_backoff "normalerweise 32 oder 64 Sekunden": 64 here;
--   - once at maximum_backoff, keep retrying at that interval "up to a
--     maximum number of retries", and "not indefinitely": 12 attempts in all,
--     so 11 retries: six on the way up (1, 2, 4, 8, 16, 32 s, each + up to
--     1 s), then five at the cap (64 s each): 383 s of waiting without jitter,
--     at most 389 s with it.
--     Mobile clients may need more: `--set max_attempts=N`.
-- Everything else (400, 401, 403, 404, 408, 409, ...) is final.  When the
-- retries are exhausted the call stops with verdict "exhausted" (exit
-- status 4 on the command line), to be reported or logged.

name = "memorystore"
max_attempts = 12
backoff = {
  kind = "exponential",
  initial = 1,
  multiplier = 2,
  max = 64,
  jitter = "additive",
  jitter_max = 1,
  cap_jitter = true,
}

function is_transient(status, body, info)
  if status == 0 then return true end  -- no answer: connect, timeout, reset, dns, tls
  return status == 429 or (status >= 500 and status <= 599)
end
