-- azure_faults.lua: the fault classifier of Azure's Retry pattern, shared by
-- policies/azure.lua, policies/azure-interactive.lua and policies/azure-batch.lua.
--
-- Source: Azure Architecture Center, "Retry pattern" (seeds/004). It names
-- three answers to a fault:
--   cancel             the fault is not transient, or repeating it will not
--                      help ("an authentication failure caused by providing
--                      invalid credentials"): 400, 401, 403, 404 and every
--                      other status not listed below.
--   retry at once      an unusual or rare fault ("a network packet becoming
--                      corrupted"): a connection reset, the first time in a
--                      call.  A reset that comes again, or after another
--                      fault, is no longer rare and takes the delay below;
--                      the pattern warns that minimal delays with many
--                      retries "further degrade a busy service".
--   retry after delay  the commonplace connectivity and busy faults: 408 and
--                      other timeouts, 429, 500, 502, 503, 504, and every
--                      other transport failure (connect, dns, tls, ...).
--
--   local faults = require "azure_faults"
--   function is_transient(status, body, info)
--     return faults.is_transient(status, body, info)
--   end
--
-- Define is_transient in the policy file itself (as above) rather than
-- assigning faults.is_transient to it: a decision's rule then names the
-- policy's own line.
--
-- A module: it sets no globals, so a policy that requires it loads without
-- warnings.
local M = {}

-- Busy or connectivity faults answered by the server: retry after a delay.
local DELAY = { [408] = true, [429] = true, [500] = true, [502] = true,
                [503] = true, [504] = true }

--- The answer for one outcome: "cancel", "now" or "delay".
function M.answer(status, err, attempt)
  if status == 0 then
    if err == "reset" and (attempt or 1) == 1 then return "now" end
    return "delay"
  end
  if DELAY[status] then return "delay" end
  return "cancel"
end

--- is_transient for the Retry pattern: false (cancel), 0 (retry at once)
--- or true (retry after the policy's backoff).
function M.is_transient(status, body, info)
  local a = M.answer(status, status == 0 and info.error or nil,
                     status == 0 and info.attempt or nil)
  if a == "now" then return 0 end
  return a == "delay"
end

return M
