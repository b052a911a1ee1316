max_attempts = 3
function is_transient(status) if status == 503 then return "yes" elseif status == 0 then return 0/0 end return -1 end
function is_success() return 1 end
function backoff() return math.huge end
