-- returns: prepare smuggles a second request through CR LF in a header
-- drive: cli_prepare; expect: header "X-A": its value holds a line break
max_attempts = 2
function prepare(request) -- HERE
  request.headers["X-A"] = "b\r\nGET /smuggled HTTP/1.1"
end
