-- 429 with Retry-After: 1 (seconds), then 200: a policy honouring
-- Retry-After waits about a second before its second attempt.
respond = sequence{
  {status = 429, headers = {["Retry-After"] = "1"}, body = "slow down\n"},
  {status = 200, body = "ok\n"},
}
