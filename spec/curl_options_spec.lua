-- curl's options of `luaretry run`, each with curl's
-- spelling and meaning, against the fault server (two of them, on
-- 127.0.0.1 and 127.0.0.2, for redirects to another host) and, for TLS,
-- `openssl s_server` with throwaway certificates made here.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
local proc = require "support.proc"
local q = proc.q

local FAST, concat = proc.FAST, proc.concat

local function run(args) return proc.run_http(args, { timeout = 30 }) end

-- A plain shell command, never under a preloaded sanitizer runtime.
local function sh(cmd) return proc.sh("env -u LD_PRELOAD sh -c " .. q(cmd)) end

describe("run with curl's options", function ()
  local a, b, tmp

  setup(function ()
    tmp = proc.tmpdir()
    assert.are.equal(0, sh("printf 'squeezed\\n' | gzip -c > " .. q(tmp .. "/body.gz")))
    local script = tmp .. "/server.lua"
    proc.writefile(script, ("GZIP_BODY = %q\n"):format(proc.readfile(tmp .. "/body.gz")) ..
                   proc.readfile(here .. "/fixtures/cli/curl_server.lua"))
    a = proc.server(script)
    b = proc.server(script, { host = "127.0.0.2" })
  end)
  teardown(function ()
    if a then a:stop() end
    if b then b:stop() end
    proc.rmtree(tmp)
  end)
  before_each(function ()
    a:reset()
    b:reset()
  end)

  describe("the request", function ()
    it("-X/--request and -H/--header, short, long, attached", function ()
      for _, args in ipairs({ { "-X", "PUT", "-H", "X-One: 1" }, { "--request", "PUT", "--header", "X-One: 1" },
                              { "-XPUT", "-HX-One: 1" } }) do
        a:reset()
        local r = run(concat({ a.base .. "/ok" }, args))
        assert.are.equal(0, r.code, r.stderr)
        local seen = a:requests_on("/ok")
        assert.are.equal(1, #seen)
        assert.are.equal("PUT", seen[1].method)
        assert.are.equal("1", seen[1].headers["x-one"])
      end
    end)

    it("-X or -H that would split the request, or is no token: a usage error naming it, -s or not, nothing sent", function ()
      for _, case in ipairs({ { { "-H", "X-A : 1" }, 'header name "X%-A " is not a name' },
                              { { "-X", "GE T" }, 'method "GE T" is not a method' } }) do
        for _, quiet in ipairs({ {}, { "-s" } }) do
          a:reset()
          local r = run(concat({ a.base .. "/ok" }, concat(case[1], quiet)))
          assert.are.equal(2, r.code, r.stderr)
          assert.matches("^luaretry: run: [^\n]*" .. case[2], r.stderr)
          assert.are.equal(0, #a:requests_on("/ok"))
        end
        -- a batch: each URL says so, and the batch exits 2 as one URL does
        local r = run(concat({ a.base .. "/ok", a.base .. "/ok?2" }, case[1]))
        assert.are.equal(2, r.code, r.stderr)
        assert.matches("%[2%] [^\n]*exit 2: [^\n]*" .. case[2], r.stderr)
        assert.matches("2 URLs: 0 succeeded, 2 failed, [^\n]*exit 2\n", r.stderr)
        assert.are.equal(0, #a:requests_on("/ok"))
      end
    end)

    it("-T through -L's 302 and 303 keeps its PUT and its body (a PUT with no body went)", function ()
      local file = tmp .. "/up.bin"
      proc.writefile(file, ("u"):rep(1000))
      for _, via in ipairs({ "/redirect", "/see-other" }) do -- 302, and 303 (curl's would GET)
        a:reset()
        local r = run({ "-L", "-T", file, a.base .. via .. "?" .. a.base .. "/landing" })
        assert.are.equal(0, r.code, r.stderr)
        assert.are.equal("landed\n", r.stdout)
        local seen = a:requests_on("/landing")
        assert.are.equal(1, #seen)
        assert.are.equal("PUT", seen[1].method, via)
        assert.are.equal(1000, seen[1].body_len, via)
      end
    end)

    it("-F in a batch: each URL gets the form under the boundary its Content-Type names (it crashed)", function ()
      a:reset()
      local r = run({ a.base .. "/ok", a.base .. "/ok?2", "-F", "a=b", "-s" })
      assert.are.equal(0, r.code, r.stderr)
      local seen = a:requests_on("/ok")
      assert.are.equal(2, #seen)
      for _, q in ipairs(seen) do
        assert.are.equal("POST", q.method)
        local boundary = q.headers["content-type"]:match("^multipart/form%-data; boundary=(%-+%x+)$")
        assert.is_truthy(boundary, q.headers["content-type"])
        -- the parts' bytes: the boundary's lines, the part's head, "b"
        local want = ("--%s\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nb\r\n--%s--\r\n")
                       :format(boundary, boundary)
        assert.are.equal(#want, q.body_len)
      end
    end)

    it("-d/--data: a POST; several are joined with &; @FILE is sent as it is", function ()
      proc.writefile(tmp .. "/form", "b=2\r\nc=3\n")
      local r = run({ a.base .. "/ok", "-d", "a=1", "--data", "@" .. tmp .. "/form" })
      assert.are.equal(0, r.code, r.stderr)
      local seen = a:requests_on("/ok")[1]
      assert.are.equal("POST", seen.method)
      assert.are.equal(proc.fnv1a("a=1&b=2\r\nc=3\n"), seen.body_hash)
      assert.are.equal("application/x-www-form-urlencoded", seen.headers["content-type"])
      -- alone, the file's bytes exactly (curl would drop its CR and LF)
      a:reset()
      r = run({ a.base .. "/ok", "-d", "@" .. tmp .. "/form" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(proc.fnv1a("b=2\r\nc=3\n"), a:requests_on("/ok")[1].body_hash)
    end)

    it("--data-binary @FILE is sent as it is; --data-raw takes @ literally", function ()
      local bytes = "x\r\ny\n\0z"
      proc.writefile(tmp .. "/bin", bytes)
      local r = run({ a.base .. "/ok", "--data-binary", "@" .. tmp .. "/bin" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(proc.fnv1a(bytes), a:requests_on("/ok")[1].body_hash)
      a:reset()
      r = run({ a.base .. "/ok", "--data-raw", "@not-a-file" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(proc.fnv1a("@not-a-file"), a:requests_on("/ok")[1].body_hash)
    end)

    it("-A/--user-agent, luaretry/VERSION by default, none with -A ''", function ()
      local version = proc.run({ "--version" }).stdout:match("^luaretry (%S+)")
      assert.is_truthy(version)
      run({ a.base .. "/ok" })
      assert.are.equal("luaretry/" .. version, a:requests_on("/ok")[1].headers["user-agent"])
      a:reset()
      run({ a.base .. "/ok", "--user-agent", "probe/1" })
      assert.are.equal("probe/1", a:requests_on("/ok")[1].headers["user-agent"])
      a:reset()
      run({ a.base .. "/ok", "-A", "" })
      assert.is_nil(a:requests_on("/ok")[1].headers["user-agent"])
    end)

    it("-u/--user sends Basic credentials; without a password it is a usage error", function ()
      local r = run({ a.base .. "/auth", "-u", "user:s3cret" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("welcome\n", r.stdout)
      a:reset()
      r = run({ a.base .. "/auth", "--user", "user" })
      assert.are.equal(2, r.code)
      assert.matches("does not prompt", r.stderr)
      assert.are.equal(0, #a:requests())
    end)

    it("--compressed asks for gzip and writes the body decoded", function ()
      local r = run({ a.base .. "/gzip", "--compressed" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("squeezed\n", r.stdout)
      assert.matches("gzip", a:requests_on("/gzip")[1].headers["accept-encoding"])
    end)

    it("-w: the URL variables and a Location header never show a user name or password", function ()
      local host = "127.0.0.1:" .. a.port
      local r = run({ "http://user:s3cret@" .. host .. "/ok", "-w", "|%{url_effective}" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("ok\n|http://" .. host .. "/ok", r.stdout)
      r = run({ a.base .. "/redirect?http://bob:hunter2@" .. host .. "/ok",
                "-w", "|%{redirect_url}|%header{location}" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("moved\n|http://" .. host .. "/ok|http://" .. host .. "/ok", r.stdout)
      r = run({ "-L", a.base .. "/redirect?http://bob:hunter2@" .. host .. "/ok", "-w", "|%{url_effective}" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("ok\n|http://" .. host .. "/ok", r.stdout)
    end)

    it("a URL without a scheme is http://", function ()
      local r = run({ "127.0.0.1:" .. a.port .. "/ok", "-w", "|%{url_effective}" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("ok\n|http://127.0.0.1:" .. a.port .. "/ok", r.stdout)
      local r2 = run({ "ftp.example.invalid/x" })  -- guessed as curl guesses: ftp, refused
      assert.are.equal(2, r2.code)
      assert.matches("only http and https", r2.stderr)
    end)

    -- curl's URL globbing was silently not done: -o 'f_#1.txt' with
    -- URL/{a,b} made one request and a file named f_#1.txt; -g was unknown
    it("URLs are literal, as with curl -g: -g/--globoff taken; -o naming #N refused without it", function ()
      local out = tmp .. "/f_#1.txt"
      local r = run({ "-o", out, a.base .. "/{a,b}" })
      assert.are.equal(2, r.code, r.stderr)
      assert.matches("^luaretry: run: %-o [^\n]*f_#1%.txt: #1 is where curl puts what a URL glob matched", r.stderr)
      assert.matches("give %-g", r.stderr)
      assert.are.equal(0, #a:requests())
      assert.is_nil(proc.readfile(out))
      for _, g in ipairs({ "-g", "--globoff" }) do
        a:reset()
        r = run({ g, "-o", out, a.base .. "/{a,b}" })
        assert.are.equal(0, r.code, r.stderr)
        assert.are.equal("default\n", proc.readfile(out))
        local seen = a:requests()
        assert.are.equal(1, #seen)
        assert.matches("{a,b}", seen[1].path, 1, true)
        os.remove(out)
      end
      -- a # that names no glob is a name like any other
      r = run({ "-o", tmp .. "/f_#x.txt", a.base .. "/ok" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("ok\n", proc.readfile(tmp .. "/f_#x.txt"))
    end)
  end)

  describe("beyond one URL", function ()
    it("-A, -u and -L hold for every URL of a batch and every request of a workflow", function ()
      local r = run({ a.base .. "/auth", a.base .. "/redirect?" .. a.base .. "/landing", "-u", "user:s3cret",
                      "-A", "batch/1", "-L" })
      assert.are.equal(0, r.code, r.stderr)
      for _, path in ipairs({ "/auth", "/redirect", "/landing" }) do
        local seen = a:requests_on(path)[1]
        assert.are.equal("batch/1", seen.headers["user-agent"], path)
        assert.are.equal("Basic dXNlcjpzM2NyZXQ=", seen.headers.authorization, path)
      end
      a:reset()
      proc.writefile(tmp .. "/flow.lua", [[
max_attempts = 1
deadline = 10
function run(http, args)
  local r = http.get(args[1])
  return r.status, r.body
end
]])
      r = proc.run({ "run", tmp .. "/flow.lua", a.base .. "/auth", "-u", "user:s3cret" }, { timeout = 30 })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("welcome\n", r.stdout)
      assert.matches("^luaretry/", a:requests_on("/auth")[1].headers["user-agent"])
      -- --connect-timeout is the policy's connect_timeout: a workflow's requests too
      r = proc.run({ "run", tmp .. "/flow.lua", a.base .. "/ok", "--connect-timeout", "1" })
      assert.are.equal(0, r.code, r.stderr)
      -- what only one URL has is refused for a batch, before any request
      a:reset()
      r = proc.run({ "run", "http", a.base .. "/ok", a.base .. "/ok", "-w", "%{http_code}" })
      assert.are.equal(2, r.code)
      assert.are.equal(0, #a:requests())
    end)
  end)

  describe("redirects", function ()
    it("without -L a 302 is the answer; -L/--location follows it", function ()
      local target = a.base .. "/landing"
      local r = run({ a.base .. "/redirect?" .. target })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("moved\n", r.stdout)
      r = run({ a.base .. "/redirect?" .. target, "-L" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("landed\n", r.stdout)
      r = run({ a.base .. "/redirect?" .. target, "--location" })
      assert.are.equal("landed\n", r.stdout)
    end)

    it("--max-redirs: a loop stops there", function ()
      local r = run({ a.base .. "/loop", "-L", "--max-redirs", "3", "--set", "max_attempts=1" })
      assert.are_not.equal(0, r.code)
      assert.are.equal(4, #a:requests_on("/loop"))
    end)

    it("--max-redirs reached is final: the limit the user set is not retried", function ()
      -- http's ten attempts, the default classifier, and every shipped policy
      for _, policy in ipairs({ "http", "default", "gcs", "iam", "memorystore", "azure" }) do
        a:reset()
        local args = { "run", policy, a.base .. "/loop", "-L", "--max-redirs", "2", "--log-json", "-" }
        if policy == "default" then
          local file = tmp .. "/default.lua"
          proc.writefile(file, "max_attempts = 5\ndeadline = 30\nbackoff = { initial = 0.01 }\n")
          args[2] = file
        end
        local r = proc.run(concat(args, FAST), { timeout = 30 })
        assert.are.equal(1, r.code, policy .. ": " .. r.stderr)
        assert.are.equal(3, #a:requests_on("/loop"), policy)
        assert.matches('"error":"too_many_redirects"', r.stderr, 1, false, policy)
        assert.matches('"verdict":"final"', r.stderr, 1, false, policy)
      end
    end)

    it("to another host: -u, Authorization and Cookie are not sent there; --location-trusted sends them", function ()
      local target = b.base .. "/landing"
      local args = { a.base .. "/redirect?" .. target, "-L", "-u", "user:s3cret",
                     "-H", "Cookie: session=1" }
      local r = run(args)
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("landed\n", r.stdout)
      local first, there = a:requests_on("/redirect")[1], b:requests_on("/landing")[1]
      assert.are.equal("Basic dXNlcjpzM2NyZXQ=", first.headers.authorization)
      assert.are.equal("session=1", first.headers.cookie)
      assert.is_nil(there.headers.authorization)
      assert.is_nil(there.headers.cookie)
      -- an Authorization header of -H is dropped the same way
      a:reset(); b:reset()
      r = run({ a.base .. "/redirect?" .. target, "-L", "-H", "Authorization: Bearer t0ken" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("Bearer t0ken", a:requests_on("/redirect")[1].headers.authorization)
      assert.is_nil(b:requests_on("/landing")[1].headers.authorization)
      -- --location-trusted: the user said so
      a:reset(); b:reset()
      r = run(concat({ "--location-trusted" }, args))
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("Basic dXNlcjpzM2NyZXQ=", b:requests_on("/landing")[1].headers.authorization)
    end)
  end)

  describe("what is written", function ()
    it("-i/--include: the final response's headers, then its body", function ()
      local r = run({ a.base .. "/flaky", "-i" })
      assert.are.equal(0, r.code, r.stderr)
      assert.matches("^HTTP/1%.1 200 OK\r\n", r.stdout)
      assert.matches("\r\nX%-Attempt: second\r\n", r.stdout)
      assert.is_nil(r.stdout:find("first", 1, true))  -- the retried attempt's are dropped
      assert.matches("\r\n\r\ndone\n$", r.stdout)
      -- into -o FILE too, as curl does
      r = run({ a.base .. "/headers", "--include", "-o", tmp .. "/out" })
      assert.are.equal(0, r.code, r.stderr)
      assert.matches("^HTTP/1%.1 201 Created\r\n.*Location: /upload/session%-42\r\n.*\r\n\r\ncreated\n$",
                     proc.readfile(tmp .. "/out"))
    end)

    it("-D/--dump-header FILE and -D -", function ()
      local r = run({ a.base .. "/headers", "-D", tmp .. "/h" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("created\n", r.stdout)
      local h = proc.readfile(tmp .. "/h")
      assert.matches("^HTTP/1%.1 201 Created\r\n", h)
      assert.matches("\r\nLocation: /upload/session%-42\r\n", h)
      r = run({ a.base .. "/headers", "--dump-header", "-" })
      assert.matches("^HTTP/1%.1 201 Created\r\n.*\r\n\r\ncreated\n$", r.stdout)
    end)

    it("-w/--write-out: %{http_code} %{num_attempts} %{time_total}, %header{...}, escapes", function ()
      local r = run({ a.base .. "/flaky", "-w", "\\n%{http_code} %{num_attempts} %{time_total} %{verdict}\\n" })
      assert.are.equal(0, r.code, r.stderr)
      local code, n, t = r.stdout:match("^done\n\n(%d+) (%d+) ([%d.]+) success\n$")
      assert.are.same({ "200", "2" }, { code, n })
      assert.is_true(tonumber(t) > 0)
      r = run({ a.base .. "/headers", "--write-out", "%header{location}|%{exitcode}|%%", "-o", "/dev/null" })
      assert.are.equal("/upload/session-42|0|%", r.stdout)
      proc.writefile(tmp .. "/fmt", "%{http_code}")
      r = run({ a.base .. "/missing", "-w", "@" .. tmp .. "/fmt", "-o", tmp .. "/o" })
      assert.are.equal(1, r.code)
      assert.are.equal("404", r.stdout)
      r = run({ a.base .. "/ok", "-w", "%{no_such_thing}" })
      assert.are.equal(2, r.code)
      assert.matches("unknown variable %%{no_such_thing}", r.stderr)
    end)

    it("-w never cuts a format short: a long one is whole, a longer @FILE or a NUL byte is refused", function ()
      -- 60000 bytes of text and a variable at the very end, on the command line and from a file
      local long = ("x"):rep(60000) .. "%{http_code}"
      local r = run({ a.base .. "/ok", "-w", long, "-o", "/dev/null" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(("x"):rep(60000) .. "200", r.stdout)
      proc.writefile(tmp .. "/fmt", long)
      r = run({ a.base .. "/ok", "-w", "@" .. tmp .. "/fmt", "-o", "/dev/null" })
      assert.are.equal(("x"):rep(60000) .. "200", r.stdout)
      -- past the limit: refused before any request, never printed in part
      a:reset()
      proc.writefile(tmp .. "/fmt", ("x"):rep(65536) .. "%{http_code}")
      r = run({ a.base .. "/ok", "-w", "@" .. tmp .. "/fmt", "-o", "/dev/null" })
      assert.are.equal(2, r.code, r.stderr)
      assert.matches("%-w @[^\n]*: longer than 65536 bytes", r.stderr)
      assert.are.equal("", r.stdout)
      proc.writefile(tmp .. "/fmt", "%{http_code}\0%{exitcode}")
      r = run({ a.base .. "/ok", "-w", "@" .. tmp .. "/fmt", "-o", "/dev/null" })
      assert.are.equal(2, r.code, r.stderr)
      assert.matches("holds a NUL byte", r.stderr)
      r = run({ a.base .. "/ok", "-w", "%header{" .. ("h"):rep(300) .. "}", "-o", "/dev/null" })
      assert.are.equal(2, r.code, r.stderr)
      assert.matches("a header name above 255 bytes", r.stderr)
      assert.are.equal(0, #a:requests())
    end)

    it("-w: a lone % is printed as it is, the format's last byte too (as curl's), a command's too", function ()
      -- each read one byte past the format's end (an ASan heap-buffer-overflow)
      for f, want in pairs({ ["abc%"] = "abc%", ["%"] = "%", ["%%%"] = "%%", ["a%b%"] = "a%b%" }) do
        local r = run({ a.base .. "/ok", "-s", "-o", "/dev/null", "-w", f })
        assert.are.equal(0, r.code, r.stderr)
        assert.are.equal(want, r.stdout, f)
      end
      local r = proc.run({ "run", "-w", "x%", "--", "true" }, { timeout = 30 })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("x%", r.stdout)
    end)

    it("-f/--fail: no body for a failed call", function ()
      local r = run({ a.base .. "/missing", "-f" })
      assert.are.equal(1, r.code)
      assert.are.equal("", r.stdout)
      r = run({ a.base .. "/ok", "--fail" })
      assert.are.equal("ok\n", r.stdout)
    end)

    it("-q, and -sS as in curl: nothing but one final line on failure; -s alone: nothing", function ()
      for _, flag in ipairs({ "-q", "-sS", "--silent" }) do
        local r = run({ a.base .. "/missing", flag })
        assert.are.equal(1, r.code)
        if flag == "--silent" then
          assert.are.equal("", r.stderr)
        else
          local lines = proc.lines(r.stderr)
          assert.are.equal(1, #lines, r.stderr)
          assert.matches("^luaretry: attempt 1/10: 404 %-> final %(.*policies/http%.lua:%d+%); body: no such thing$", lines[1])
        end
        local ok = run({ a.base .. "/flaky", flag })
        assert.are.equal(0, ok.code)
        assert.are.equal("", ok.stderr)
      end
    end)
  end)

  describe("time", function ()
    it("--max-time is the attempt's timeout, --retry-max-time the call's deadline", function ()
      -- the call's own time (its log's), not the process's: a busy
      -- machine's start-up under ASan is no part of either limit
      local function timed(args)
        return proc.run_timed(proc.concat({ "run", "http" }, args, proc.FAST), { timeout = 30 })
      end
      local r = timed({ a.base .. "/slow", "--max-time", "0.3", "--set", "max_attempts=2" })
      assert.are.equal(4, r.code, r.stderr)
      assert.matches("attempt 1/2: timeout error", r.stderr)
      assert.is_true(r.elapsed < 2.5, r.elapsed .. " s")
      r = timed({ a.base .. "/slow", "-m", "0.2", "--retry-max-time", "1" })
      assert.are.equal(5, r.code, r.stderr)
      assert.is_true(r.elapsed < 1.6, r.elapsed .. " s")
      r = run({ a.base .. "/ok", "--max-time", "soon" })
      assert.are.equal(2, r.code)
    end)

    it("--connect-timeout bounds the connection alone, a single URL and a batch", function ()
      assert.are.equal(0, sh("cc " .. q(here .. "/fixtures/cli/blackhole.c") .. " -o " .. q(tmp .. "/blackhole")))
      sh("exec " .. q(tmp .. "/blackhole") .. " >" .. q(tmp .. "/bh.out") ..
         " </dev/null & echo $! > " .. q(tmp .. "/bh.pid"))
      local pid = tonumber(proc.wait_for(function () return proc.readfile(tmp .. "/bh.pid") end))
      local log = tmp .. "/connect.json"
      -- one finally: busted keeps only a test's last
      finally(function () proc.kill(pid) os.remove(log) end)
      local port = tonumber(proc.wait_for(function () return (proc.readfile(tmp .. "/bh.out") or ""):match("%d+") end))
      local url = "http://127.0.0.1:" .. port .. "/"
      -- each call's attempt, as the engine timed it from the call's start
      -- (a busy machine's start-up is not in it): a timeout well before
      -- --max-time (20 s), where the connection alone is bounded (0.3 s)
      local function attempts(n)
        local t = {}
        for _, line in ipairs(proc.lines(proc.readfile(log))) do
          local e = proc.json.decode(line)
          if e.attempt then
            assert.are.equal("timeout", e.error, line)
            assert.is_true(e.elapsed < 10, ("attempt over %.3f s, --max-time 20"):format(e.elapsed))
            t[#t + 1] = e
          end
        end
        assert.are.equal(n, #t, proc.readfile(log))
      end
      local r = run({ url, "--connect-timeout", "0.3", "--max-time", "20", "--set", "max_attempts=1",
                      "--log-json", log })
      assert.are.equal(4, r.code, r.stderr)
      assert.matches("timeout error", r.stderr)
      attempts(1)
      r = run({ url, url, "--connect-timeout", "0.3", "--max-time", "20", "--set", "max_attempts=1",
                "--parallel-max", "2", "--log-json", log })
      assert.are.equal(4, r.code, r.stderr)
      attempts(2)
    end)
  end)

  describe("TLS, against openssl s_server", function ()
    local servers = {}

    -- openssl s_server -www on a free port; its PID is stopped in teardown.
    local function s_server(extra)
      local n = #servers + 1
      local out, pidfile = tmp .. "/tls" .. n .. ".out", tmp .. "/tls" .. n .. ".pid"
      sh("cd " .. q(tmp) .. " && exec openssl s_server -accept 127.0.0.1:0 -cert server.pem " ..
         "-key server.key -www " .. extra .. " >" .. q(out) .. " 2>&1 </dev/null & echo $! >" .. q(pidfile))
      servers[n] = tonumber(proc.wait_for(function () return proc.readfile(pidfile) end))
      local port = proc.wait_for(function () return (proc.readfile(out) or ""):match("ACCEPT 127%.0%.0%.1:(%d+)") end, 10)
      assert.is_truthy(port, proc.readfile(out))
      return "https://127.0.0.1:" .. port .. "/"
    end

    local plain, verify
    setup(function ()
      local req = "openssl req -x509 -newkey rsa:2048 -nodes -days 2 "
      assert.are.equal(0, sh("cd " .. q(tmp) .. " && " .. req .. "-keyout server.key -out server.pem " ..
        "-subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null && " ..
        req .. "-keyout client.key -out client.pem -subj /CN=client 2>/dev/null && " ..
        "openssl pkey -in client.key -aes256 -passout pass:s3cret -out client-enc.key"))
      plain = s_server("")
      verify = s_server("-Verify 1 -CAfile client.pem")
    end)
    teardown(function ()
      for _, pid in ipairs(servers) do proc.kill(pid) end
    end)

    local ONCE = { "--set", "max_attempts=1" }

    it("a self-signed certificate does not verify; -k/--insecure takes it", function ()
      local r = run(concat({ plain }, ONCE))
      assert.are_not.equal(0, r.code)
      assert.matches("tls", r.stderr)
      for _, k in ipairs({ "-k", "--insecure" }) do
        r = run(concat({ plain, k }, ONCE))
        assert.are.equal(0, r.code, r.stderr)
        assert.matches("s_server", r.stdout)
      end
    end)

    it("--cacert: the certificate verifies against the file given", function ()
      local r = run(concat({ plain, "--cacert", tmp .. "/server.pem" }, ONCE))
      assert.are.equal(0, r.code, r.stderr)
      assert.matches("s_server", r.stdout)
    end)

    it("--cert/--key: a client certificate, its key's password after a colon as in curl", function ()
      local ca = { "--cacert", tmp .. "/server.pem" }
      local r = run(concat({ verify }, ca, ONCE))
      assert.are_not.equal(0, r.code)
      r = run(concat({ verify, "--cert", tmp .. "/client.pem", "--key", tmp .. "/client.key" }, ca, ONCE))
      assert.are.equal(0, r.code, r.stderr)
      assert.matches("s_server", r.stdout)
      r = run(concat({ verify, "-E", tmp .. "/client.pem:s3cret", "--key", tmp .. "/client-enc.key" }, ca, ONCE))
      assert.are.equal(0, r.code, r.stderr)
      r = run(concat({ verify, "-E", tmp .. "/client.pem:wrong", "--key", tmp .. "/client-enc.key" }, ca, ONCE))
      assert.are_not.equal(0, r.code)
    end)
  end)

  describe("options curl has and luaretry does not", function ()
    it("are refused with what to do instead, and listed in luaretry(1)", function ()
      local man = proc.readfile(proc.root .. "/core/cli/man/luaretry.1")
      -- curl's retry options are taken now (spec/curl_compat_spec.lua)
      for _, opt in ipairs({ "--proto", "--netrc", "--parallel-immediate" }) do
        local r = run({ a.base .. "/ok", opt, "x" })
        assert.are.equal(2, r.code, opt)
        assert.matches("curl's " .. opt:gsub("%p", "%%%0") .. " is not taken: ", r.stderr)
        assert.is_truthy(man:find("Fl " .. opt:sub(2):gsub("%-", "\\-"), 1, true), opt .. " not in luaretry(1)")
      end
      assert.are.equal(0, #a:requests())
    end)
  end)
end)
