-- The rate limiter against a real rate limit: nginx's limit_req (burst 0,
-- 429 beyond), a batch of URLs at --parallel-max 8.  Unpaced, most attempts get
-- a 429; paced below the limit, or adaptive, few do.  The comparisons are
-- between runs of the same spec, with wide margins (a busy machine
-- delays requests, which only lowers the 429s of the paced runs).
local proc = require "support.proc"

local NGINX
for _, path in ipairs { "/usr/sbin/nginx", "/usr/bin/nginx" } do
  if io.open(path, "r") then NGINX = path break end
end

local function free_port()
  local f = assert(io.popen("python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\",0)); print(s.getsockname()[1])'"))
  local port = tonumber(f:read("l"))
  f:close()
  return port
end

local function start_nginx(dir, rate)
  local port = free_port()
  assert(proc.sh("mkdir -p " .. proc.q(dir .. "/logs") .. " " .. proc.q(dir .. "/www") .. " " ..
                 proc.q(dir .. "/tmp") .. " && chmod 755 " .. proc.q(dir) .. " " .. proc.q(dir .. "/www")) == 0)
  proc.writefile(dir .. "/www/ok.txt", "ok\n")
  local conf = ([[
worker_processes 1;
pid DIR/nginx.pid;
error_log DIR/logs/error.log;
events { worker_connections 256; }
http {
  access_log DIR/logs/access.log;
  client_body_temp_path DIR/tmp;
  proxy_temp_path DIR/tmp;
  fastcgi_temp_path DIR/tmp;
  uwsgi_temp_path DIR/tmp;
  scgi_temp_path DIR/tmp;
  limit_req_zone $server_name zone=one:1m rate=RATEr/s;
  limit_req_status 429;
  server {
    listen 127.0.0.1:PORT;
    server_name spec;
    root DIR/www;
    location / { limit_req zone=one; try_files /ok.txt =404; }
  }
}
]]):gsub("DIR", dir):gsub("RATE", tostring(rate)):gsub("PORT", tostring(port))
  proc.writefile(dir .. "/nginx.conf", conf)
  assert(proc.sh(proc.q(NGINX) .. " -p " .. proc.q(dir) .. " -c " .. proc.q(dir .. "/nginx.conf")) == 0,
         "nginx did not start")
  assert(proc.wait_for(function () return proc.readfile(dir .. "/nginx.pid") end, 10))
  return port
end

local function statuses(dir)
  local ok, too_many = 0, 0
  for line in (proc.readfile(dir .. "/logs/access.log") or ""):gmatch("[^\n]+") do
    local status = line:match('" (%d%d%d) ')
    if status == "200" then ok = ok + 1 elseif status == "429" then too_many = too_many + 1 end
  end
  return ok, too_many
end

local describe_nginx = NGINX and describe or pending

describe_nginx("the rate limiter against nginx's limit_req", function ()
  local dir, port
  setup(function ()
    dir = proc.tmpdir()
    port = start_nginx(dir, 20)
  end)
  teardown(function ()
    local pid = tonumber(proc.readfile(dir .. "/nginx.pid") or "")
    if pid then proc.kill(pid) end
    proc.rmtree(dir)
  end)

  local function batch(set)
    local urls = {}
    for i = 1, 60 do urls[i] = ("http://127.0.0.1:%d/u/%d"):format(port, i) end
    proc.writefile(dir .. "/urls", table.concat(urls, "\n") .. "\n")
    proc.writefile(dir .. "/logs/access.log", "")
    proc.sh("kill -USR1 $(cat " .. proc.q(dir .. "/nginx.pid") .. ")")
    proc.sleep(1.5)   -- the limiter forgets the last run
    local args = { "run", proc.root .. "/policies/http.lua", "--urls", dir .. "/urls", "--parallel-max", "8",
                   "-s", "--output-dir", dir .. "/www",
                   -- short throttling waits: the spec's time goes to pacing, not backoff
                   "--set", "throttle_backoff.initial=0.1", "--set", "throttle_backoff.max=1",
                   "--set", "max_attempts=100" }
    for _, kv in ipairs(set) do args[#args + 1] = "--set"; args[#args + 1] = kv end
    local r = proc.run(args, { timeout = 300 })
    local ok, too_many = statuses(dir)
    return r, ok, too_many
  end

  it("unpaced, most attempts get a 429; at 15 a second (below nginx's 20), almost none; adaptive, few", function ()
    -- unpaced: http.lua without its guards (its own rate is adaptive)
    local r, ok, unpaced = batch { "rate=none", "budget=none" }
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(60, ok)
    assert.is_true(unpaced >= 30, "unpaced 429s: " .. unpaced)
    local paced
    r, ok, paced = batch { "rate.limit=15", "rate.adaptive=false" }
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(60, ok)
    assert.is_true(paced <= unpaced / 5, "paced 429s: " .. paced .. " against " .. unpaced)
    assert.is_true(r.secs >= 3.5, "60 URLs at 15 a second take 3.9 s at least: " .. r.secs)
    local adaptive
    r, ok, adaptive = batch {}   -- http.lua's own: rate = { adaptive = true }
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(60, ok)
    assert.is_true(adaptive <= unpaced / 2, "adaptive 429s: " .. adaptive .. " against " .. unpaced)
  end)
end)
