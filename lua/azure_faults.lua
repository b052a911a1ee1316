-- azure_faults.lua: the fault classifier of Azure's Retry pattern, shared by
-- policies/azure.lua, policies/azure-interactive.lua and policies/azure-batch.lua.
--
-- Sources:
--   * Azure Architecture Center, "Retry pattern".  It names three answers
--     to a fault:
--       cancel             the fault is not transient, or repeating it will
--                          not help ("an authentication failure caused by
--                          providing invalid credentials"): 400, 401, 403,
--                          404, 409, 501 and every other status not listed
--                          below; and a certificate or host name that does
--                          not verify (transport failure "tls_verify"): it
--                          is a credential of the server's that no retry
--                          makes valid; and the other transport failures
--                          no retry heals (retry.final_error: a redirect
--                          loop or refused redirect, too_large,
--                          checksum_mismatch).
--       retry at once      an unusual or rare fault ("a network packet
--                          becoming corrupted"): a connection reset, the
--                          first time in a call.  A reset that comes again,
--                          or after another fault, is no longer rare and
--                          takes the delay below; the pattern warns that
--                          minimal delays with many retries "further
--                          degrade a busy service".
--       retry after delay  the commonplace connectivity and busy faults:
--                          408 and other timeouts, 429, 500, 502, 503, 504,
--                          and every other transport failure (connect, dns,
--                          a TLS handshake that broke off, ...).
--   * The Azure SDKs' retry policies (Azure Core for .NET, Java, Python,
--     JavaScript and Rust) honour three server hints, in this order:
--     `retry-after-ms` and `x-ms-retry-after-ms` (milliseconds), then
--     `Retry-After` (seconds or an HTTP-date).  The engine reads
--     Retry-After itself; the two millisecond headers are read here, from
--     info.headers, and is_transient returns their wait in seconds instead
--     of the backoff, as the SDKs take it, spread upward by the policy's
--     jitter ({wait = seconds, jitter = true}): clients told the same
--     instant do not all come back at it.  A hint counts only on an answer
--     that is retried anyway (a 503 with a hint is waited for; a 400 with
--     one is still final), and a negative or garbled one is ignored, as the
--     engine ignores a bad Retry-After.  When a Retry-After is present too,
--     the engine still waits at least that long: never earlier than any
--     server asked.
--   * Throttling: a 429 or 503 whose rate-limit headers say the quota is
--     spent (the IETF RateLimit field, X-RateLimit-Remaining: 0 with
--     X-RateLimit-Reset, as Azure API Management can send them; the
--     engine's reader, info.rate_limit) waits until the reset, as the
--     server's wait (bounded by max_retry_after like a Retry-After).
--     With a millisecond hint too, the later of the two counts: a hint
--     does not cut the wait for the quota short.
--
--   max_retry_after = 2        -- optional: hints above this stop the call
--   is_transient = require("azure_faults").is_transient
--
-- The policy's own max_retry_after (default 300 s, the engine's own
-- default) bounds the millisecond hints as it bounds Retry-After: a hint
-- above it is not waited for, and the outcome is final.  A fourth argument,
-- when given, bounds them instead.  (The script sees its own
-- max_retry_after, not a --set override of it: the engine does not hand
-- overrides to scripts.)  A decision's rule names this file's line.
--
-- A module: it sets no globals, so a policy that requires it loads without
-- warnings.
local retry = require "retry"

local M = {}

-- Busy or connectivity faults answered by the server: retry after a delay.
local DELAY = { [408] = true, [429] = true, [500] = true, [502] = true,
                [503] = true, [504] = true }

-- The Azure SDKs' millisecond hints, in the order they read them.
local MS_HINTS = { "retry-after-ms", "x-ms-retry-after-ms" }

local DEFAULT_LIMIT = 300  -- seconds: the engine's default max_retry_after

--- The answer for one outcome: "cancel", "now" or "delay".
function M.answer(status, err, attempt)
  if status == 0 then
    if retry.final_error(err) then return "cancel" end
    if err == "reset" and (attempt or 1) == 1 then return "now" end
    return "delay"
  end
  if DELAY[status] then return "delay" end
  return "cancel"
end

-- Milliseconds as a header gives them: digits with an optional fraction,
-- surrounding blanks allowed; of a repeated header (joined with ", ") the
-- first value counts.  nil for anything else.  Digits too many for a
-- double are math.huge: a valid hint, above any limit.
local function milliseconds(value)
  if type(value) ~= "string" then return nil end
  local first = value:match("^[ \t]*([^,]*)")
  local digits = first and first:match("^(%d+%.?%d*)[ \t]*$")
  if not digits then return nil end
  return tonumber(digits)
end

--- The server's wait from retry-after-ms or x-ms-retry-after-ms, in
--- seconds, or nil when neither holds a valid value.
function M.server_wait(headers)
  if type(headers) ~= "table" then return nil end
  for _, name in ipairs(MS_HINTS) do
    local ms = milliseconds(headers[name])
    if ms then return ms / 1000, name end
  end
  return nil
end

--- is_transient for the Retry pattern: false (cancel), 0 (retry at once),
--- the server's wait in seconds (a millisecond hint), or true (retry after
--- the policy's backoff).
function M.is_transient(status, body, info, limit)
  local a = M.answer(status, status == 0 and info.error or nil,
                     status == 0 and info.attempt or nil)
  if a == "now" then return 0 end
  if a ~= "delay" then return false end
  if status ~= 0 then
    local wait = M.server_wait(info.headers)
    if wait then
      -- rawget: the policy's own max_retry_after, when it sets one
      local most = limit or rawget(_ENV, "max_retry_after") or DEFAULT_LIMIT
      if wait > most or wait == math.huge then return false end
    end
    -- the quota's reset, when it is later than the hint: never earlier than
    -- any server asked, and bounded by max_retry_after as a Retry-After is
    local reset = (status == 429 or status == 503) and retry.rate_limit_wait(info)
    if reset and (not wait or reset.wait >= wait) then return reset end
    if wait then return { wait = wait, jitter = true } end
  end
  return true
end

--- is_throttling for Azure: a 429, or a 503 whose error code is ServerBusy
--- (Azure Storage's answer when an account reaches its scalability
--- targets, as its error-code list and scalability pages say).
function M.is_throttling(status, body)
  if status == 429 then return true end
  return status == 503 and type(body) == "string" and body:find("ServerBusy", 1, true) ~= nil
end

return M
