-- returns: prepare points the request at a file:// URL
-- drive: cli_prepare; expect: must be an http or https URL, not "file:///etc/passwd"
max_attempts = 2
function prepare(request) -- HERE
  request.url = "file:///etc/passwd"
end
