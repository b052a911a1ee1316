max_attempts = 2
function run(http, args) local r = http.get("gopher://127.0.0.1:25/") return r.status, r.body end
