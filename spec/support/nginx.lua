-- spec/support/nginx.lua: a real nginx (Debian's nginx-light) for the specs
-- that need a real server's ways (its 206 answers, its limit_req): one
-- worker on a free loopback port, everything of it (config, PID, logs,
-- temporary files, the served root www/) in a temporary folder, stopped
-- by its PID.  Every wait is bounded.
--
--   local nginx = require "support.nginx"
--   ;(nginx.bin and describe or pending)("...", function ()
--     local n = nginx.start { http = "...", server = "...", files = { ["big.bin"] = data } }
--     n.dir, n.port, n.base, n:reopen_logs(), n:stop()
--
-- http: directives for the http block (an access_log among them; DIR is
-- the folder), server: for the one server block (after listen and root).
local proc = require "support.proc"

local M = {}

for _, path in ipairs { "/usr/sbin/nginx", "/usr/bin/nginx" } do
  if io.open(path, "r") then M.bin = path break end
end

local Nginx = {}
Nginx.__index = Nginx

local CONF = [[
worker_processes 1;
pid DIR/nginx.pid;
error_log DIR/logs/error.log;
events { worker_connections 256; }
http {
  client_body_temp_path DIR/tmp;
  proxy_temp_path DIR/tmp;
  fastcgi_temp_path DIR/tmp;
  uwsgi_temp_path DIR/tmp;
  scgi_temp_path DIR/tmp;
HTTP
  server {
    listen 127.0.0.1:PORT;
    root DIR/www;
SERVER
  }
}
]]

-- A port the kernel gives out now (luasocket, a dependency already).
local function free_port()
  local socket = require "socket"
  local s = assert(socket.bind("127.0.0.1", 0))
  local _, port = s:getsockname()
  s:close()
  return tonumber(port)
end

function M.start(opts)
  local self = setmetatable({ dir = proc.tmpdir(), port = free_port() }, Nginx)
  local dir, q = self.dir, proc.q
  assert(proc.sh("mkdir -p " .. q(dir .. "/logs") .. " " .. q(dir .. "/www") .. " " ..
                 q(dir .. "/tmp") .. " && chmod 755 " .. q(dir) .. " " .. q(dir .. "/www")) == 0)
  for name, data in pairs(opts.files or {}) do proc.writefile(dir .. "/www/" .. name, data) end
  -- (the function form: a "%" in the directives is not a capture)
  local conf = CONF:gsub("HTTP", function () return opts.http or "" end)
                   :gsub("SERVER", function () return opts.server or "" end)
                   :gsub("DIR", dir):gsub("PORT", tostring(self.port))
  proc.writefile(dir .. "/nginx.conf", conf)
  if proc.sh(q(M.bin) .. " -p " .. q(dir) .. " -c " .. q(dir .. "/nginx.conf")) ~= 0 or
     not proc.wait_for(function () return proc.readfile(dir .. "/nginx.pid") end, 10) then
    local log = proc.readfile(dir .. "/logs/error.log") or ""
    self:stop()
    error("nginx did not start: " .. log, 2)
  end
  self.base = "http://127.0.0.1:" .. self.port
  return self
end

function Nginx:pid()
  return tonumber(proc.readfile(self.dir .. "/nginx.pid") or "")
end

-- Empties the access log and has nginx open it again (SIGUSR1).
function Nginx:reopen_logs()
  proc.writefile(self.dir .. "/logs/access.log", "")
  proc.sh("kill -USR1 " .. (self:pid() or 0) .. " 2>/dev/null")
end

function Nginx:stop()
  local pid = self:pid()
  if pid then proc.kill(pid) end
  proc.rmtree(self.dir)
end

return M
