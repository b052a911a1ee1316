-- spec/run/cmd.lua: a command policy under the default rule (every
-- non-zero status but 126 and 127 transient, a timeout too).
name = "cmd"
max_attempts = 3
deadline = 30
attempt_timeout = 20
backoff = { kind = "constant", initial = 0.05, jitter = "none" }
