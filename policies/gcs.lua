-- policies/gcs.lua: Google Cloud Storage.
--
-- Rule: truncated exponential backoff, as "Google Cloud Storage: truncated
-- exponential backoff" (seeds/003) gives it, to the letter:
--   - retry every request answered with a 5xx or 429, "including uploads and
--     downloads of data or metadata", and every transport failure (status 0:
--     connect, timeout, reset, dns, tls, ...), where no answer came at all;
--   - wait min(2^n + random_number_milliseconds, maximum_backoff) before
--     retry n (n from 0), the random part up to 1000 ms and drawn anew for
--     every retry: jitter "additive", jitter_max = 1, cap_jitter = true;
--   - maximum_backoff "typically 32 or 64 seconds": 32 here,
--     `--set backoff.max=64` for 64;
--   - "continue waiting and retrying up to some maximum number of retries,
--     but do not increase the wait period": 10 attempts in all, so 9
--     retries: five on the way up (1, 2, 4, 8, 16 s, each + up to 1 s),
--     then four at the cap (32 s each): 159 s of waiting without jitter,
--     at most 164 s with it (255 s and 261 s with backoff.max=64).
-- Everything else (400, 401, 403, 404, 408, 409, 412, ...) is final.
--
-- Taken to the letter, the formula puts the jitter under the cap: once
-- capped, every client waits exactly 32 s and clients that failed together
-- retry together.  `--set backoff.cap_jitter=false` keeps them spread.
--
-- Idempotency: an object write may be repeated only when it is conditional.
-- GET, HEAD, OPTIONS and DELETE are repeated as usual; a POST, PATCH or PUT
-- only when the request carries a precondition: the query parameter
-- ifGenerationMatch, ifMetagenerationMatch or generation (with a value), or
-- the header x-goog-if-generation-match (any case).  Without one, a transient
-- answer to a write that may have taken effect is final.

name = "gcs"
max_attempts = 10
backoff = {
  kind = "exponential",
  initial = 1,
  multiplier = 2,
  max = 32,
  jitter = "additive",
  jitter_max = 1,
  cap_jitter = true,
}

function is_transient(status, body, info)
  if status == 0 then return true end  -- no answer: connect, timeout, reset, dns, tls
  return status == 429 or (status >= 500 and status <= 599)
end

local ALWAYS = { GET = true, HEAD = true, OPTIONS = true, DELETE = true }
local WRITES = { POST = true, PATCH = true, PUT = true }
local PRECONDITION_PARAMS = { ifGenerationMatch = true, ifMetagenerationMatch = true,
                              generation = true }
local PRECONDITION_HEADER = "x-goog-if-generation-match"

-- True when the URL's query string holds a precondition parameter with a value.
local function precondition_in_url(url)
  if type(url) ~= "string" then return false end
  local query = url:match("^[^?#]*%?([^#]*)")
  if not query then return false end
  for pair in query:gmatch("[^&]+") do
    local key, value = pair:match("^([^=]*)=(.*)$")
    if key and PRECONDITION_PARAMS[key] and value ~= "" then return true end
  end
  return false
end

-- Header names are as the user typed them: compare without case.
local function precondition_in_headers(headers)
  if type(headers) ~= "table" then return false end
  for k, v in pairs(headers) do
    if type(k) == "string" and k:lower() == PRECONDITION_HEADER
       and type(v) == "string" and v ~= "" then
      return true
    end
  end
  return false
end

function is_idempotent(request)
  local method = (request.method or "GET"):upper()
  if ALWAYS[method] then return true end
  if WRITES[method] then
    return precondition_in_url(request.url) or precondition_in_headers(request.headers)
  end
  return false
end
