max_attempts = 3
function is_success(status, body) return status == 200 and not body:find("error", 1, true) end
function is_transient(status, body) return body:find("UNAVAILABLE", 1, true) ~= nil end
