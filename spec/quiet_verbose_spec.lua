-- -q, -s, -v and --trace-ascii keep curl's promises: -q one line for every
-- failure (a final answer, attempts spent, a refusal by the local or the
-- fleet's breaker before the first attempt or after a wait), -s nothing
-- (batches included); -v curl's "> " and "< " header lines on every
-- attempt beside luaretry's own; --trace-ascii FILE as curl's; no
-- credential shown by either.  The real build/luaretry against the fault
-- server, a real redis-server, and commands in a temporary folder.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
package.path = here .. "/?.lua;" .. package.path
local proc = require "support.proc"
local redis = require "support.redis"

local ROUTES = proc.root .. "/policies/faults/routes.lua"
local FAST = { "--set", "backoff.initial=0.01", "--set", "backoff.jitter=none" }

local function args(...)
  local t = {}
  for _, part in ipairs { ... } do
    if type(part) == "table" then
      for _, w in ipairs(part) do t[#t + 1] = w end
    else
      t[#t + 1] = part
    end
  end
  return t
end

local function run(...) return proc.run(args(...), { timeout = 30 }) end

describe("quiet and verbose", function ()
  local srv, tmp, breaker
  before_each(function ()
    srv = proc.server(ROUTES)
    tmp = proc.tmpdir()
    -- a breaker that opens after two failures in a row, for a minute
    breaker = tmp .. "/breaker.lua"
    proc.writefile(breaker, 'name = "breaker"\nmax_attempts = 3\ndeadline = 30\nattempt_timeout = 10\n' ..
                   'backoff = { kind = "constant", initial = 0.01, jitter = "none" }\n' ..
                   'breaker = { failures = 2, open_seconds = 60 }\n')
  end)
  after_each(function ()
    srv:stop()
    proc.rmtree(tmp)
  end)

  describe("-q: exactly one line for every failure", function ()
    it("attempts spent, with -o", function ()
      local r = run("run", srv.base .. "/fail-for?n=9", "--set", "max_attempts=2", FAST, "-q",
                    "-o", tmp .. "/out")
      assert.are.equal(4, r.code)
      assert.are.equal(1, #proc.lines(r.stderr), r.stderr)
      assert.matches("^luaretry: attempt 2/2: 503 %-> exhausted", r.stderr)
      r = run("run", srv.base .. "/ok", "-q")
      assert.are.equal(0, r.code)
      assert.are.equal("", r.stderr)
    end)

    it("the local breaker opening after a wait: exit 6", function ()
      local r = run("run", breaker, "-q", "--", "false")
      assert.are.equal(6, r.code, r.stderr)
      assert.are.equal(1, #proc.lines(r.stderr), r.stderr)
      assert.matches("circuit_open", r.stderr)
    end)

    it("the fleet's breaker, after a wait and before the first attempt: exit 6", function ()
      local rd = redis.start()
      finally(function () rd:stop() end)
      -- (PATIENT timeouts for a busy machine's Redis: the default 100 ms
      -- would add the outage's line to the one counted here)
      local patient = require("support.fleet").PATIENT
      local r = run("run", breaker, "-q", "--redis", rd.url, patient, "--", "false")
      assert.are.equal(6, r.code, r.stderr)
      assert.are.equal(1, #proc.lines(r.stderr), r.stderr)
      assert.matches("circuit_open", r.stderr)
      -- the next process is refused before it runs anything
      r = run("run", breaker, "-q", "--redis", rd.url, patient, "--", "sh", "-c", "echo ran")
      assert.are.equal(6, r.code, r.stderr)
      assert.are.equal("", r.stdout)
      assert.are.same({ "luaretry: before attempt 1: circuit_open (breaker): the fleet's circuit is open: " ..
                        "calls fail fast for 60.000 s after 2 transient failures in a row" },
                      proc.lines(r.stderr))
      r = run("run", breaker, "-s", "--redis", rd.url, patient, "--", "true")
      assert.are.equal(6, r.code, r.stderr)
      assert.are.equal("", r.stderr)
    end)

    it("a batch: one line per failed URL, none for the others", function ()
      local r = run("run", "http", srv.base .. "/ok", srv.base .. "/fail-for?n=9", srv.base .. "/ok",
                    "--set", "max_attempts=2", FAST, "-q", "--output-dir", tmp)
      assert.are.equal(4, r.code)
      local lines = proc.lines(r.stderr)
      assert.are.equal(1, #lines, r.stderr)
      assert.matches("^luaretry: %[2%] http://[^ ]*/fail%-for%?n=9: exhausted, 2 attempts", lines[1])
    end)
  end)

  it("-q: an interrupted run is one line, -s none", function ()
    for _, flag in ipairs { "-q", "-s" } do
      local job = proc.spawn({ "run", flag, "--", "sh", "-c", "touch " .. proc.q(tmp .. "/up") .. "; sleep 20; true" }, tmp)
      finally(function () job:stop() end)
      assert.truthy(proc.wait_for(function () return proc.readfile(tmp .. "/up") end, 10))
      job:signal("INT")
      assert.are.equal(130, job:wait(10))
      assert.are.same(flag == "-q" and { "luaretry: interrupted" } or {}, proc.lines(job:stderr() or ""))
      os.remove(tmp .. "/up")
    end
  end)

  describe("-s: nothing", function ()
    it("a single call's failure, a batch's lines, a breaker's refusal", function ()
      local r = run("run", srv.base .. "/fail-for?n=9", "--set", "max_attempts=2", FAST, "-s")
      assert.are.equal(4, r.code)
      assert.are.equal("", r.stderr)
      r = run("run", "http", srv.base .. "/ok", srv.base .. "/fail-for?n=9", "--set", "max_attempts=2",
              FAST, "-s", "--output-dir", tmp)
      assert.are.equal(4, r.code)
      assert.are.equal("", r.stderr)
      r = run("run", breaker, "-s", "--", "false")
      assert.are.equal(6, r.code)
      assert.are.equal("", r.stderr)
      -- standard input that does not end before the deadline: exit 5, silently
      local out = proc.readfile_cmd("(sleep 2 | " .. proc.q(proc.bin) ..
                                    " run -s --set deadline=0.5 -- cat; echo rc=$?) 2>&1")
      assert.are.equal("rc=5\n", out)
      -- without -s or -q, a batch has a summary (and a line for every URL
      -- that failed: none here); -v a line for every URL
      r = run("run", "http", srv.base .. "/ok", srv.base .. "/ok", "--output-dir", tmp)
      assert.matches("^luaretry: 2 URLs: 2 succeeded, 0 failed, %d+ bytes, [%d.]+ s, exit 0\n$", r.stderr)
      r = run("run", "http", "-v", srv.base .. "/ok", srv.base .. "/ok", "--output-dir", tmp)
      local _, n = r.stderr:gsub("luaretry: %[%d%] http://[^\n]*: success", "")
      assert.are.equal(2, n, r.stderr)
    end)
  end)

  describe("-v", function ()
    it("every attempt's request and response headers, > and <, between luaretry's lines", function ()
      local r = run("run", srv.base .. "/flaky", FAST, "-v")
      assert.are.equal(0, r.code, r.stderr)
      local lines = proc.lines(r.stderr)
      local gets, statuses, order = 0, {}, {}
      for _, line in ipairs(lines) do
        if line == "> GET /flaky HTTP/1.1" then gets = gets + 1; order[#order + 1] = ">" end
        local st = line:match("^< HTTP/1%.1 (%d+)")
        if st then statuses[#statuses + 1] = tonumber(st) end
        if line:match("^luaretry: attempt %d") then order[#order + 1] = "L" end
      end
      assert.are.equal(3, gets)
      assert.are.same({ 503, 503, 200 }, statuses)
      assert.are.same({ ">", "L", ">", "L", ">", "L" }, order)
      assert.truthy(r.stderr:find("\n> Host: 127.0.0.1:" .. srv.port .. "\n", 1, true))
      assert.truthy(r.stderr:find("\n< Content-Length: 0\n", 1, true))
    end)

    it("shows no credential: Authorization, Proxy-Authorization, Cookie, -u, a URL's userinfo", function ()
      local url = srv.base:gsub("^http://", "http://bob:hunter2@") .. "/ok"
      local r = run("run", url, "-v", "-H", "Cookie: session=s3cr3t", "-H", "Proxy-Authorization: Basic cHJveHk6cHc=",
                    "-H", "X-Plain: visible", "--trace-ascii", tmp .. "/trace")
      assert.are.equal(0, r.code, r.stderr)
      local trace = proc.readfile(tmp .. "/trace")
      for _, text in ipairs { r.stderr, trace } do
        assert.is_nil(text:find("hunter2", 1, true))
        assert.is_nil(text:find("s3cr3t", 1, true))
        assert.is_nil(text:find("Ym9iOmh1bnRlcjI", 1, true))  -- base64 of bob:hunter2
        assert.is_nil(text:find("cHJveHk6cHc", 1, true))
        assert.truthy(text:find("Authorization: Basic [redacted]", 1, true), text)
        assert.truthy(text:find("Proxy-Authorization: Basic [redacted]", 1, true), text)
        assert.truthy(text:find("Cookie: [redacted]", 1, true), text)
        assert.truthy(text:find("X-Plain: visible", 1, true), text)
      end
      r = run("run", srv.base .. "/ok", "-v", "-u", "alice:pa55word")
      assert.is_nil(r.stderr:find("pa55word", 1, true))
      assert.truthy(r.stderr:find("> Authorization: Basic [redacted]\n", 1, true), r.stderr)
    end)

    it("nor the server's Set-Cookie, nor a URL's user:password in a header it sent", function ()
      local other = proc.server(here .. "/fixtures/run/error_body.lua")
      finally(function () other:stop() end)
      local r = run("run", other.base .. "/cookie", "-v", "--trace-ascii", tmp .. "/trace")
      assert.are.equal(0, r.code, r.stderr)
      local trace = proc.readfile(tmp .. "/trace")
      for _, text in ipairs { r.stderr, trace } do
        assert.is_nil(text:find("abc123secret", 1, true))
        assert.is_nil(text:find("letmein", 1, true))
        assert.truthy(text:find("Set-Cookie: [redacted]", 1, true), text)
        assert.truthy(text:find("Content-Location: http://127.0.0.1/elsewhere", 1, true), text)
      end
    end)

    it("with -i: the headers on standard error and in the output both", function ()
      local r = run("run", srv.base .. "/ok", "-v", "-i")
      assert.are.equal(0, r.code, r.stderr)
      assert.matches("^HTTP/1%.1 200 OK\r\n", r.stdout)
      assert.truthy(r.stderr:find("\n> GET /ok HTTP/1.1\n", 1, true), r.stderr)
      assert.truthy(r.stderr:find("\n< HTTP/1.1 200 OK\n", 1, true), r.stderr)
    end)

    it("a workflow's requests too", function ()
      local wf = tmp .. "/wf.lua"
      proc.writefile(wf, "max_attempts = 2\ndeadline = 10\n" ..
                     "function run(http, args)\n" ..
                     "  local r = http.get(args[1], { Authorization = 'Bearer zzz-token' })\n" ..
                     "  return r.status, r.body\nend\n")
      local r = run("run", wf, srv.base .. "/ok", "-v")
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("ok\n", r.stdout)
      assert.truthy(r.stderr:find("\n> GET /ok HTTP/1.1\n", 1, true), r.stderr)
      assert.truthy(r.stderr:find("\n> Authorization: Bearer [redacted]\n", 1, true), r.stderr)
      assert.is_nil(r.stderr:find("zzz-token", 1, true))
    end)

    it("every URL of a batch", function ()
      local r = run("run", "http", srv.base .. "/ok", srv.base .. "/flaky", FAST, "-v", "--output-dir", tmp)
      assert.are.equal(0, r.code, r.stderr)
      local _, oks = r.stderr:gsub("\n> GET /ok HTTP/1%.1\n", "")
      local _, flakies = r.stderr:gsub("\n> GET /flaky HTTP/1%.1\n", "")
      assert.are.equal(1, oks)
      assert.are.equal(3, flakies)
    end)
  end)

  describe("--trace-ascii FILE", function ()
    it("as curl's: headers and bytes with their offsets, every attempt", function ()
      local r = run("run", srv.base .. "/flaky", FAST, "--trace-ascii", tmp .. "/trace", "-q")
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("ok\n", r.stdout)
      assert.are.equal("", r.stderr)  -- -q: the trace goes to its file only
      local t = proc.readfile(tmp .. "/trace")
      local req = "GET /flaky HTTP/1.1\r\nHost: 127.0.0.1:" .. srv.port .. "\r\n"
      local _, sends = t:gsub("=> Send header, %d+ bytes %(0x%x+%)\n0000: GET /flaky HTTP/1%.1\n", "")
      assert.are.equal(3, sends, t)
      assert.truthy(t:find(("%04x: Host: 127.0.0.1:%d\n"):format(#"GET /flaky HTTP/1.1\r\n", srv.port), 1, true), t)
      assert.truthy(#req > 0)
      assert.truthy(t:find("<= Recv header, 17 bytes (0x11)\n0000: HTTP/1.1 200 OK\n", 1, true), t)
      assert.truthy(t:find("<= Recv data, 3 bytes (0x3)\n0000: ok.\n", 1, true), t)
      assert.truthy(t:find("== Info: ", 1, true))
    end)

    it("- is standard output; a file it cannot write is an error naming it", function ()
      local r = run("run", srv.base .. "/ok", "--trace-ascii", "-", "-o", tmp .. "/body")
      assert.are.equal(0, r.code, r.stderr)
      assert.matches("=> Send header", r.stdout)
      r = run("run", srv.base .. "/ok", "--trace-ascii", tmp .. "/no/such/dir/trace")
      assert.are.equal(2, r.code)
      assert.matches("^luaretry: %-%-trace%-ascii [^:]*/no/such/dir/trace: No such file or directory", r.stderr)
    end)
  end)
end)

-- on_breaker's error comes through the script's print() path (the
-- library's log callback), which `run` shows with -v only: documented in
-- luaretry-policy(5), pinned here
describe("an error in on_breaker", function ()
  local tmp
  before_each(function () tmp = proc.tmpdir() end)
  after_each(function () proc.rmtree(tmp) end)

  it("is said with -v, after the breaker's line and what the hook printed; not without", function ()
    local path = tmp .. "/ob.lua"
    proc.writefile(path, "max_attempts = 4\ndeadline = 20\nattempt_timeout = 10\n" ..
                   "breaker = { failures = 2 }\n" ..
                   'backoff = { kind = "constant", initial = 0.01, jitter = "none" }\n' ..
                   'function on_breaker(state)\n  print("told " .. state)\n' ..
                   '  error("ob broke " .. state)\nend\n')
    local r = run("run", path, "-v", "--", "false")
    assert.are.equal(6, r.code, r.stderr)
    local lines = proc.lines(r.stderr)
    assert.are.same({ "luaretry: breaker: open", "luaretry: script: told open",
                      "luaretry: script: on_breaker: " .. path .. ":8: ob broke open" },
                    { lines[2], lines[3], lines[4] }, r.stderr)
    r = run("run", path, "--", "false")
    assert.are.equal(6, r.code, r.stderr)
    assert.is_nil(r.stderr:find("on_breaker", 1, true), r.stderr)
    assert.is_nil(r.stderr:find("told", 1, true), r.stderr)
  end)
end)
