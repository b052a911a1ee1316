-- `make install PREFIX=<tmp>`, then README.md's "Embedding in C" example
-- compiled through pkg-config against the installed library and run
-- against the real fault server.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
package.path = here .. "/?.lua;" .. package.path
local proc = require "support.proc"
local q = proc.q

local BODY200 = "the 200 body\0with \r\n and \255\254 bytes\n"  -- spec/run/server.lua /flaky

describe("make install", function ()
  it("installs a library that README's C example builds against and runs with", function ()
    local prefix = proc.tmpdir()
    local srv
    finally(function ()
      if srv then srv:stop() end
      proc.rmtree(prefix)
    end)
    local log = prefix .. "/make.log"
    local code = proc.sh("cd " .. q(proc.root) .. " && env -u LD_PRELOAD timeout 300 make install PREFIX=" ..
                         q(prefix) .. " >" .. q(log) .. " 2>&1")
    assert.are.equal(0, code, proc.readfile(log))
    for _, f in ipairs({ "/include/luaretry.h", "/include/luaretry_curl.h", "/lib/libluaretry.a",
                         "/lib/libluaretry.so", "/lib/pkgconfig/luaretry.pc", "/bin/luaretry",
                         "/share/luaretry/policies/http.lua", "/share/luaretry/lua/retry.lua" }) do
      assert.is_truthy(io.open(prefix .. f), "not installed: " .. f)
    end

    -- README.md's C example, exactly as documented
    local readme = assert(proc.readfile(proc.root .. "/README.md"))
    local section = assert(readme:match("\n## Embedding in C\n(.*)"), "no Embedding in C section")
    local source = assert(section:match("```c\n(.-)```"), "no ```c block in Embedding in C")
    assert.matches("retry_get%.c", source)
    proc.writefile(prefix .. "/retry_get.c", source)
    local pc = "PKG_CONFIG_PATH=" .. q(prefix .. "/lib/pkgconfig") .. " pkg-config"
    local cc = "cd " .. q(prefix) .. " && env -u LD_PRELOAD cc retry_get.c $(" .. pc .. " --cflags --libs luaretry)" ..
               " -Wl,-rpath," .. q(prefix .. "/lib") .. " -o retry_get >cc.log 2>&1"
    assert.are.equal(0, proc.sh(cc), proc.readfile(prefix .. "/cc.log"))

    -- a short policy beside it; require reaches the installed lua/ helpers
    proc.writefile(prefix .. "/fast.lua", [[
name = "fast"
max_attempts = 5
deadline = 30
backoff = { initial = 0.05, jitter = "none" }
local retry = require "retry"
local transient = retry.status_in { 500, 502, 503, 504 }
function is_transient(status, body, info) return status == 0 or transient(status) end
]])
    srv = proc.server(here .. "/run/server.lua")
    local r = proc.run({ prefix .. "/fast.lua", srv.base .. "/flaky" },
                       { bin = prefix .. "/retry_get", timeout = 30, plain = true })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(BODY200, r.stdout)
    local lines = proc.lines(r.stderr)
    assert.are.equal(3, #lines, r.stderr)
    assert.matches("^attempt 1: status 503 %-> retry, wait 0%.050 s", lines[1])
    assert.matches("^attempt 3: status 200 %-> success", lines[3])
    assert.are.equal(3, #srv:requests_on("/flaky"))

    -- the installed command finds the installed policies and helpers
    srv:reset()
    r = proc.run({ "run", prefix .. "/share/luaretry/policies/http.lua", srv.base .. "/new", "-q" },
                 { bin = prefix .. "/bin/luaretry", timeout = 30, plain = true })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("new content\n", r.stdout)
  end)
end)
