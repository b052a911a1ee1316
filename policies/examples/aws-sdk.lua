-- policies/examples/aws-sdk.lua: AWS's SDK retry behaviour, headers included.
--
--   luaretry run policies/examples/aws-sdk.lua URL
--
-- Sources: the AWS SDKs and Tools Reference Guide, "Retry behavior", and
-- the SDKs' standard retry strategy.  Three attempts in all; a transient
-- error waits from 50 ms, a throttling error from 1 s, both doubling to a
-- 20 s cap with full jitter; a transient error costs 14 tokens of the retry
-- quota and a throttling error 5 (here: a failure's 1 token and
-- budget.throttle_cost's default 0.357).
-- Transport failures are retried but those no retry heals
-- (retry.final_error: tls_verify, redirects, too_large, checksum_mismatch).
-- Throttling: a 429, or an error code the SDKs list as throttling (most
-- come with a 400, some with a 503, S3's SlowDown among them).
-- Every attempt carries `amz-sdk-invocation-id` (the call's invocation id,
-- the same on every attempt) and `amz-sdk-request: attempt=N; max=M`, as
-- the SDKs send them, so a service's logs can tie retries together.

name = "aws-sdk"
max_attempts = 3
deadline = 60
attempt_timeout = 20
backoff = { initial = 0.05, multiplier = 2, max = 20, jitter = "full" }
throttle_backoff = { initial = 1, multiplier = 2, max = 20, jitter = "full" }
budget = { max_tokens = 10, token_ratio = 0.1 }

local retry = require "retry"
local transient_status = retry.status_in { 500, 502, 503, 504 }

local THROTTLING = { "Throttling", "ThrottlingException", "ThrottledException",
  "RequestThrottledException", "TooManyRequestsException",
  "ProvisionedThroughputExceededException", "TransactionInProgressException",
  "RequestLimitExceeded", "BandwidthLimitExceeded", "LimitExceededException",
  "RequestThrottled", "SlowDown", "PriorRequestNotComplete", "EC2ThrottledException" }

-- The error code of an AWS error body: JSON ("__type" or "code") or XML <Code>.
local function error_code(body)
  local code = retry.matches(body, '"__type"%s*:%s*"([^"]*)"') or
               retry.matches(body, '"[Cc]ode"%s*:%s*"([^"]*)"') or
               retry.matches(body, "<Code>([^<]*)</Code>")
  return code and code:match("([^#]*)$")  -- "aws.protocoltests#ThrottlingException"
end

local function throttling_code(body)
  local code = error_code(body)
  if not code then return false end
  for _, name in ipairs(THROTTLING) do
    if code == name then return true end
  end
  return false
end

function is_transient(status, body, info)
  if status == 0 then return not retry.final_error(info.error) end
  if status == 429 or transient_status(status) then return true end
  return (status == 400 or status == 403) and throttling_code(body)
end

function is_throttling(status, body)
  return status == 429 or throttling_code(body)
end

function prepare(request, attempt, info)
  if not info.invocation_id then return end  -- a prepare outside a call
  request.headers["amz-sdk-invocation-id"] = info.invocation_id
  request.headers["amz-sdk-request"] = "attempt=" .. attempt .. "; max=" .. max_attempts
end
