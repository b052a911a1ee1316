max_attempts = 4
budget = { max_tokens = 10, token_ratio = 0.1 }
breaker = { failures = 2, open_seconds = 5, probes = 1 }
function on_breaker(state) print("breaker", state) end
function on_retry(info) print(info.attempt, info.status, info.delay, info.wait_source, info.rule) end
