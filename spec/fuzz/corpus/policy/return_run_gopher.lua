-- returns: a workflow asks for gopher:// (raw bytes to any port)
-- drive: cli_run; expect: only http and https
max_attempts = 2
function run(http, args)
  local r = http.get("gopher://127.0.0.1:25/_HELO") -- HERE
  return r.status, r.body
end
