local retry = require "retry"
max_attempts = 2
is_transient = retry.status_range(500, 599)
