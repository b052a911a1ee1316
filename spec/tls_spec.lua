-- Transport failures with their cause: a certificate that does not verify
-- is its own failure, tls_verify, final under the default rule and every
-- shipped policy (curl stops at once too), and libcurl's own message for
-- each failed attempt reaches the attempt line, --log-json's error_detail
-- and the script's info.error_detail.  A real TLS server: openssl s_server
-- with a throwaway self-signed certificate.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
local proc = require "support.proc"

local root = proc.root
local HTTP = root .. "/policies/http.lua"

-- `openssl s_server` on 127.0.0.1 with a certificate made for the test;
-- stopped by PID.
local function tls_server(dir)
  local key, cert = dir .. "/key.pem", dir .. "/cert.pem"
  assert(proc.sh("env -u LD_PRELOAD openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost" ..
                 " -keyout " .. proc.q(key) .. " -out " .. proc.q(cert) .. " >/dev/null 2>&1") == 0,
         "openssl req failed")
  local out, pidfile = dir .. "/s_server.out", dir .. "/s_server.pid"
  proc.sh("env -u LD_PRELOAD openssl s_server -accept 127.0.0.1:0 -www -cert " .. proc.q(cert) ..
          " -key " .. proc.q(key) .. " </dev/null >" .. proc.q(out) .. " 2>&1 & echo $! > " ..
          proc.q(pidfile))
  local srv = { pid = tonumber(proc.readfile(pidfile)) }
  local port = proc.wait_for(function () return (proc.readfile(out) or ""):match("ACCEPT [%d.]+:(%d+)") end, 10)
  if not port then
    proc.kill(srv.pid)
    error("openssl s_server did not start: " .. (proc.readfile(out) or ""))
  end
  srv.url = "https://127.0.0.1:" .. port .. "/"
  function srv.stop() proc.kill(srv.pid) end
  return srv
end

describe("a certificate that does not verify", function ()
  local tmp, srv
  setup(function ()
    tmp = proc.tmpdir()
    srv = tls_server(tmp)
  end)
  teardown(function ()
    if srv then srv.stop() end
    proc.rmtree(tmp)
  end)

  local function shipped()
    local t = {}
    for _, name in ipairs { "azure-batch", "azure-interactive", "azure", "gcs", "http", "iam",
                            "memorystore" } do
      t[#t + 1] = root .. "/policies/" .. name .. ".lua"
    end
    return t
  end

  it("is tls_verify, final at once under every shipped policy, with libcurl's message", function ()
    for _, policy in ipairs(shipped()) do
      local r = proc.run({ "run", policy, srv.url }, { timeout = 30 })
      assert.are.equal(1, r.code, policy .. ": " .. r.stderr)
      assert.is_true(r.secs < 5, policy .. " took " .. r.secs .. " s")
      local lines = proc.lines(r.stderr)
      assert.are.equal(1, #lines, r.stderr)
      assert.matches("^luaretry: attempt 1[/%d]*: tls_verify error %-> final %(.-%): " ..
                     "SSL certificate problem: self[- ]signed certificate", lines[1])
    end
  end)

  it("is final under the default rule too", function ()
    local policy = tmp .. "/plain.lua"
    proc.writefile(policy, "max_attempts = 5\ndeadline = 30\nattempt_timeout = 10\n")
    local r = proc.run({ "run", policy, srv.url }, { timeout = 30 })
    assert.are.equal(1, r.code, r.stderr)
    assert.matches("attempt 1/5: tls_verify error %-> final %(default%)", r.stderr)
  end)

  it("reaches --log-json's error_detail and the script's info.error_detail", function ()
    local policy, log = tmp .. "/detail.lua", tmp .. "/log.json"
    proc.writefile(policy, [[
max_attempts = 2
deadline = 30
function is_transient(status, body, info)
  print(info.error .. " / " .. tostring(info.error_detail))
  return false
end
]])
    local r = proc.run({ "run", policy, srv.url, "-v", "--log-json", log }, { timeout = 30 })
    assert.are.equal(1, r.code, r.stderr)
    assert.matches("luaretry: script: tls_verify / SSL certificate problem: self[- ]signed certificate",
                   r.stderr)
    local e = proc.json.decode(proc.lines(proc.readfile(log))[1])
    assert.are.equal("tls_verify", e.error)
    assert.matches("^SSL certificate problem: self[- ]signed certificate", e.error_detail)
  end)
end)

describe("error_detail", function ()
  it("names a connection refused, in the attempt line and --log-json", function ()
    local tmp = proc.tmpdir()
    finally(function () proc.rmtree(tmp) end)
    local gone = proc.server(here .. "/fixtures/run/server.lua")
    local port = gone.port
    gone:stop()
    local r = proc.run({ "run", HTTP, "http://127.0.0.1:" .. port .. "/", "--set", "max_attempts=1",
                         "--log-json", tmp .. "/log.json" }, { timeout = 30 })
    assert.are.equal(4, r.code, r.stderr)
    assert.matches("connect error %-> exhausted .*: Failed to connect to 127%.0%.0%.1 port " .. port, r.stderr)
    local e = proc.json.decode(proc.lines(proc.readfile(tmp .. "/log.json"))[1])
    assert.matches("^Failed to connect to 127%.0%.0%.1 port " .. port, e.error_detail)
  end)
end)
