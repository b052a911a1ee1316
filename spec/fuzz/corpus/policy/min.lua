max_attempts = 3
