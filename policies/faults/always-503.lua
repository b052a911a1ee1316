-- Every request fails with 503: the policy must give up (max_attempts or
-- deadline) rather than retry forever.
respond = {status = 503, body = "unavailable\n"}
