-- retry.lua: small helpers for policy scripts.
--
--   local retry = require "retry"
--   local transient = retry.status_in { 500, 502, 503, 504 }
--   transient(503)                          --> true
--   retry.status_range(500, 599)(503)       --> true
--   retry.contains(body, "ABORTED")         --> plain substring, no patterns
--   retry.matches(body, '"status":%s*"(%u+)"')  --> a Lua pattern, on a
--                                               bounded prefix of the body
--   retry.matches_end(body, pattern)        --> the same on a bounded suffix
--   retry.any(f, g)(status, body, info)     --> f(...) or g(...)
--   retry.rate_limit_wait(info)             --> {wait = s, server = true} when
--                                               the headers say the quota is spent
--   retry.header(request.headers, "idempotency-key")  --> the value, any case
--   retry.method_in("POST", "GET HEAD", "POST,LOCK")  --> true: listed in one
--   retry.final_error(info.error)           --> true for a transport failure
--                                               no retry heals (tls_verify, ...)
--
-- Patterns in the sandbox count against the instruction limit (a pattern
-- that backtracks without end on a server's body is stopped like a loop);
-- still, contains() is the cheapest test, and matches() reads only the
-- first 4 KiB, where a status or an error code usually is; matches_end()
-- the last 4 KiB, for a field that comes after a long message.
local M = {}

local PATTERN_WINDOW = 4096

--- A predicate true for the listed statuses.
function M.status_in(list)
  local set = {}
  for _, s in ipairs(list) do
    if math.type(s) ~= "integer" then
      error("status_in: expected integers, got " .. tostring(s), 2)
    end
    set[s] = true
  end
  return function(status) return set[status] == true end
end

--- A predicate true for statuses from lo to hi, both included.
function M.status_range(lo, hi)
  return function(status) return status >= lo and status <= hi end
end

--- True when `body` holds `needle` as plain text.
function M.contains(body, needle)
  if type(body) ~= "string" then return false end
  return body:find(needle, 1, true) ~= nil
end

--- The captures (or match) of a Lua pattern over the first 4 KiB of body.
function M.matches(body, pattern)
  if type(body) ~= "string" then return nil end
  if #body > PATTERN_WINDOW then body = body:sub(1, PATTERN_WINDOW) end
  return body:match(pattern)
end

--- The captures (or match) of a Lua pattern over the last 4 KiB of body.
function M.matches_end(body, pattern)
  if type(body) ~= "string" then return nil end
  if #body > PATTERN_WINDOW then body = body:sub(-PATTERN_WINDOW) end
  return body:match(pattern)
end

--- A predicate true when any of the given predicates is.
function M.any(...)
  local preds = table.pack(...)
  return function(...)
    for i = 1, preds.n do
      if preds[i](...) then return true end
    end
    return false
  end
end

--- A predicate true when all of the given predicates are.
function M.all(...)
  local preds = table.pack(...)
  return function(...)
    for i = 1, preds.n do
      if not preds[i](...) then return false end
    end
    return true
  end
end

--- The wait a rate-limit answer asks for, as is_transient returns it:
--- {wait = seconds until the quota is back, server = true} (so the engine
--- spreads it by the policy's jitter and bounds it by max_retry_after as it
--- does a Retry-After), or nil when the headers do not say the quota is
--- spent.  The engine reads the fields (info.rate_limit): the IETF
--- RateLimit field, X-RateLimit-Remaining: 0 with X-RateLimit-Reset.
function M.rate_limit_wait(info)
  local wait = info.rate_limit
  if wait then return { wait = wait, server = true } end
  return nil
end

-- The transport failures (info.error of a status-0 outcome) that no retry
-- heals, final in every shipped policy as in the engine's default rule:
-- a certificate or host name that does not verify (tls_verify), the
-- redirect limit reached (too_many_redirects), a redirect to a scheme that
-- is not followed (redirect_refused), a body above the size limit, curl's
-- --max-filesize (too_large), and a download that did not match --checksum
-- after the engine's own retry from zero (checksum_mismatch: the server
-- serves something else).
local FINAL_ERRORS = { tls_verify = true, too_many_redirects = true, redirect_refused = true,
                       too_large = true, checksum_mismatch = true }

--- True when `err`, a transport failure's name, is one no retry heals.
function M.final_error(err)
  return FINAL_ERRORS[err] == true
end

--- A header's value by its name in any case, or nil.
function M.header(headers, name)
  if type(headers) ~= "table" then return nil end
  name = name:lower()
  for k, v in pairs(headers) do
    if type(k) == "string" and k:lower() == name then return v end
  end
  return nil
end

--- True when `method` is named in one of the lists (words separated by
--- commas or blanks, any case).
function M.method_in(method, ...)
  method = method:upper()
  for i = 1, select("#", ...) do
    local list = select(i, ...)
    if type(list) == "string" then
      for word in list:gmatch("[^,%s]+") do
        if word:upper() == method then return true end
      end
    end
  end
  return false
end

return M
