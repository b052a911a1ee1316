max_attempts = 3
function prepare(request) request.url = "file:///etc/passwd" end
