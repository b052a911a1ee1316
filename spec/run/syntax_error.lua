-- spec/run/syntax_error.lua: does not compile (line 3).
max_attempts = 3
backoff = { initial = = 1 }
