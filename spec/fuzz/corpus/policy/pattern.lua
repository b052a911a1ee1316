max_attempts = 3
function is_transient(status, body) return (body .. ("a"):rep(3000)):find(".-.-.-b") ~= nil end
