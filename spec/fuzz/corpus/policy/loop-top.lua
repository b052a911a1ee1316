max_attempts = 1
while true do end
