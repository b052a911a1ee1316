-- returns: prepare returns a table whose url is a number
-- drive: cli_prepare; expect: request.url must be a string
max_attempts = 2
function prepare(request) -- HERE
  return { url = 42 }
end
