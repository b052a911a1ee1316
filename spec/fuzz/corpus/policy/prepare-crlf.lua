max_attempts = 3
function prepare(request) request.headers["X"] = "a\r\nGET /smuggled HTTP/1.1" ; request.body = ("b"):rep(100) end
