-- `luaretry run` end to end: the real build/luaretry (LUARETRY_BIN if set)
-- through real libcurl against the real fault server on 127.0.0.1.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
local proc = require "support.proc"

local root = proc.root
local HTTP = root .. "/policies/http.lua"
local RUN = here .. "/fixtures/run/"
local FAST = { "--set", "backoff.initial=0.05", "--set", "backoff.jitter_max=0.05", "--seed", "1" }

-- args .. FAST .. more
local function with(args, more)
  local t = {}
  for _, a in ipairs(args) do t[#t + 1] = a end
  for _, a in ipairs(FAST) do t[#t + 1] = a end
  for _, a in ipairs(more or {}) do t[#t + 1] = a end
  return t
end

local function run(args, more) return proc.run(with(args, more), { timeout = 30 }) end

local function count(t) local n = 0; for _ in pairs(t) do n = n + 1 end; return n end

describe("luaretry run", function ()
  local srv, tmp

  proc.with_server(RUN .. "server.lua", function (s, t) srv, tmp = s, t end)

  local function url(path) return srv.base .. path end

  local run_timed = proc.run_timed

  describe("retries", function ()
    it("503, 503, 200: exit 0 on the third attempt, only the 200's body on stdout", function ()
      local r = run({ "run", HTTP, url("/flaky") })
      assert.are.equal(0, r.code)
      assert.are.equal("the 200 body\0with \r\n and \255\254 bytes\n", r.stdout)
      local lines = proc.lines(r.stderr)
      assert.are.equal(3, #lines, r.stderr)
      assert.matches("^luaretry: attempt 1/10: 503 %-> retry in %d+%.%d+ s", lines[1])
      assert.matches("^luaretry: attempt 2/10: 503 %-> retry in %d+%.%d+ s", lines[2])
      assert.matches("^luaretry: attempt 3/10: 200 %-> success", lines[3])
      assert.are.equal(3, #srv:requests_on("/flaky"))
    end)

    it("404 under policies/http.lua: one attempt, exit 1", function ()
      local r = run({ "run", HTTP, url("/notfound") })
      assert.are.equal(1, r.code)
      assert.are.equal(1, #srv:requests_on("/notfound"))
      assert.are.equal("no such thing\n", r.stdout)
    end)

    it("always 503 with --set max_attempts=4: exit 4 after exactly 4 requests", function ()
      local r = run({ "run", HTTP, url("/always503"), "--set", "max_attempts=4" })
      assert.are.equal(4, r.code, r.stderr)
      assert.are.equal(4, #srv:requests_on("/always503"))
      assert.are.equal(4, #proc.lines(r.stderr))
      assert.matches("attempt 4/4: 503 %-> exhausted", r.stderr)
    end)

    it("a transport failure (reset) is retried, and named in the log", function ()
      local r = run({ "run", HTTP, url("/reset-then-ok") })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("ok\n", r.stdout)
      assert.matches("attempt 1/10: reset error %-> retry in", r.stderr)
    end)
  end)

  describe("deadline", function ()
    it("--set deadline=2 against always 503: exit 5 within 2 s of the call", function ()
      local r = run_timed({ "run", HTTP, url("/always503"), "--set", "deadline=2",
                            "--set", "backoff.initial=0.3", "--set", "backoff.jitter_max=0.05",
                            "--seed", "1" }, { timeout = 10 })
      assert.are.equal(5, r.code, r.stderr)
      -- its last decision within the deadline; without it, 10 attempts
      -- with backoffs from 0.3 s doubling
      assert.is_true(r.elapsed <= 2, "decided at " .. r.elapsed .. " s")
      assert.matches("past the deadline %(2%.000 s%)", r.stderr)
      assert.is_true(#srv:requests_on("/always503") >= 2)
    end)

    it("a server that never answers: the attempt timeout is clipped to the deadline", function ()
      local r = run_timed({ "run", HTTP, url("/hang"), "--set", "deadline=2", "--seed", "1" },
                          { timeout = 10 })
      assert.are.equal(5, r.code, r.stderr)
      -- the attempt ends at the deadline (2 s into the call); the margin
      -- is for a busy machine's late wake-up
      assert.is_true(r.elapsed < 2 + 1, "decided at " .. r.elapsed .. " s")
      assert.is_true(r.elapsed > 1.9, "decided at only " .. r.elapsed .. " s")
      assert.matches("timeout error", r.stderr)
      assert.are.equal(1, #srv:requests_on("/hang"))
    end)
  end)

  describe("Retry-After", function ()
    local function gap(path)
      local r = run({ "run", HTTP, url(path) })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("done\n", r.stdout)
      local seen = srv:requests_on(path)
      assert.are.equal(2, #seen)
      return seen[2].time - seen[1].time, r
    end

    it("delta-seconds (2): the next request comes at least 2 s later", function ()
      local g, r = gap("/ra-seconds")
      assert.is_true(g >= 2.0, "gap " .. g)
      -- and not much more (the margin a busy machine's client and server
      -- may take): a wait of another kind would be far off either way
      assert.is_true(g < 2 + 2, "gap " .. g)
      assert.matches("attempt 1/10: 503 %-> retry in 2%.%d+ s %(server", r.stderr)
    end)

    it("an HTTP-date about two seconds ahead: the next request comes at least 2 s later", function ()
      local g = gap("/ra-date")
      assert.is_true(g >= 2.0, "gap " .. g)
      assert.is_true(g < 3 + 2, "gap " .. g)  -- the date's whole seconds: 3 s at most, and a margin
    end)

    it("3600 with --set deadline=10: exit 5 at once", function ()
      local r = run_timed(with({ "run", HTTP, url("/ra-long"), "--set", "deadline=10" }), { timeout = 30 })
      assert.are.equal(5, r.code, r.stderr)
      -- decided on the first answer, not at the deadline (10 s)
      assert.is_true(r.elapsed < 5, "decided at " .. r.elapsed .. " s")
      assert.are.equal(1, #srv:requests_on("/ra-long"))
    end)
  end)

  describe("uploads", function ()
    local data = proc.varied_bytes(100 * 1024)

    it("a POST with --data-binary @FILE is not retried on 503 without is_idempotent", function ()
      local file = tmp .. "/upload.bin"
      proc.writefile(file, data)
      local r = run({ "run", HTTP, url("/always503"), "--data-binary", "@" .. file })
      assert.are.equal(1, r.code, r.stderr)
      local seen = srv:requests_on("/always503")
      assert.are.equal(1, #seen)
      assert.are.equal("POST", seen[1].method)
      assert.are.equal(#data, seen[1].body_len)
      assert.matches("not idempotent", r.stderr)
    end)

    it("with is_idempotent, every attempt carries the byte-identical body", function ()
      local file = tmp .. "/upload.bin"
      proc.writefile(file, data)
      local r = run({ "run", RUN .. "post_idempotent.lua", url("/always503"), "--data-binary", "@" .. file })
      assert.are.equal(4, r.code, r.stderr)
      local seen = srv:requests_on("/always503")
      assert.are.equal(3, #seen)
      local hash = proc.fnv1a(data)
      for i = 1, 3 do
        assert.are.equal("POST", seen[i].method)
        assert.are.equal(102400, seen[i].body_len)
        assert.are.equal(hash, seen[i].body_hash)
      end
    end)

    it("a POST to a port where nothing listens is retried (never sent)", function ()
      local gone = proc.server(RUN .. "server.lua")
      local port = gone.port
      gone:stop()
      local r = run_timed(with({ "run", HTTP, "http://127.0.0.1:" .. port .. "/x", "-d", "payload",
                                 "--set", "max_attempts=3" }), { timeout = 30 })
      assert.are.equal(4, r.code, r.stderr)
      assert.are.equal(3, #proc.lines(r.stderr))
      assert.matches("attempt 3/3: connect error %-> exhausted", r.stderr)
      assert.is_true(r.elapsed < 2, "decided at " .. r.elapsed .. " s")
    end)
  end)

  describe("-o FILE", function ()

    it("on failure leaves the old file byte-identical and no temporary file", function ()
      local out = tmp .. "/out.bin"
      local old = "old\0content\255\n"
      proc.writefile(out, old)
      local r = run({ "run", HTTP, url("/always503"), "--set", "max_attempts=2", "-o", out })
      assert.are.equal(4, r.code, r.stderr)
      assert.are.equal(old, proc.readfile(out))
      assert.are.same({}, proc.leftovers(tmp))
      assert.are.equal("", r.stdout)
    end)

    it("on success puts the new content in place", function ()
      local out = tmp .. "/out.bin"
      proc.writefile(out, "old\n")
      local r = run({ "run", HTTP, url("/flaky"), "-o", out })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("the 200 body\0with \r\n and \255\254 bytes\n", proc.readfile(out))
      assert.are.same({}, proc.leftovers(tmp))
      assert.are.same({ "out.bin" }, proc.ls(tmp))
      assert.are.equal("", r.stdout)
    end)
  end)

  describe("signals", function ()

    it("SIGINT in the middle of a 30 s wait: exit 130 at once, no temporary file", function ()
      local outdir = tmp .. "/o"
      proc.sh("mkdir " .. proc.q(outdir))
      proc.writefile(outdir .. "/out.txt", "old\n")
      local job = proc.spawn({ "run", HTTP, url("/always503"), "--set", "backoff.initial=30",
                               "--seed", "1", "-o", outdir .. "/out.txt" }, tmp)
      finally(function () job:stop() end)
      assert.is_truthy(proc.wait_for(function () return #srv:requests_on("/always503") >= 1 end, 5))
      assert.is_truthy(proc.wait_for(function () return (job:stderr() or ""):find("retry in") end, 5))
      local sent = job:signal("INT")
      local code, ended = job:wait(5)
      assert.are.equal(130, code)
      -- the alternative waits 30 s (or for ever): a loaded machine keeps 2 s
      assert.is_true(ended - sent < 2, ("exited %.3f s after the signal"):format(ended - sent))
      assert.are.same({}, proc.leftovers(outdir))
      assert.are.equal("old\n", proc.readfile(outdir .. "/out.txt"))
      assert.matches("interrupted", job:stderr())
    end)

    it("signals ignored at start stay ignored (nohup, a background job): the call goes on", function ()
      local job = proc.spawn({ "run", HTTP, url("/flaky"), "--seed", "1", "--set", "backoff.initial=1",
                               "--set", "backoff.max=1", "--set", "backoff.jitter=none" }, tmp,
                             { ignore = "HUP,INT,QUIT" })
      finally(function () job:stop() end)
      assert.is_truthy(proc.wait_for(function () return (job:stderr() or ""):find("retry in") end, 10))
      for _, sig in ipairs { "HUP", "INT", "QUIT" } do job:signal(sig) end
      local code = job:wait(30)
      assert.are.equal(0, code, job:stderr())
      assert.are.equal(3, #srv:requests_on("/flaky"))
      assert.not_matches("interrupted", job:stderr())
    end)

    it("SIGTERM during a transfer to a hanging server: exit 130 at once", function ()
      local outdir = tmp .. "/o"
      proc.sh("mkdir " .. proc.q(outdir))
      local job = proc.spawn({ "run", HTTP, url("/hang"), "--seed", "1",
                               "-o", outdir .. "/out.txt" }, tmp)
      finally(function () job:stop() end)
      assert.is_truthy(proc.wait_for(function () return #srv:requests_on("/hang") >= 1 end, 5))
      proc.sleep(0.05)
      local sent = job:signal("TERM")
      local code, ended = job:wait(5)
      assert.are.equal(130, code)
      -- the alternative waits 30 s (or for ever): a loaded machine keeps 2 s
      assert.is_true(ended - sent < 2, ("exited %.3f s after the signal"):format(ended - sent))
      assert.are.same({}, proc.ls(outdir))
    end)
  end)

  describe("secrets on the command line", function ()
    it("-u, --redis's password, -H Authorization and Cookie are blanked in /proc/PID/cmdline, as curl does", function ()
      local job = proc.spawn({ "run", HTTP, url("/hang"), "--seed", "1", "-u", "user:s3cret-user",
                               "--redis", "redis://:s3cret-redis@127.0.0.1:1/0",
                               "-H", "Authorization: Bearer s3cret-token", "-H", "Cookie: session=s3cret-cookie",
                               "-Hproxy-authorization:Basic s3cret-attached", "-H", "X-Visible: shown" }, tmp)
      finally(function () job:stop() end)
      assert.is_truthy(proc.wait_for(function () return #srv:requests_on("/hang") >= 1 end, 10), job:stderr())
      local cmdline = assert(proc.readfile("/proc/" .. job.pid .. "/cmdline"))
      assert.is_nil(cmdline:find("s3cret", 1, true), cmdline)
      assert.is_truthy(cmdline:find("\0-H\0X-Visible", 1, true), cmdline)  -- the rest stays
      assert.is_truthy(cmdline:find("\0-u\0" .. (" "):rep(#"user:s3cret-user") .. "\0", 1, true), cmdline)
      assert.is_truthy(cmdline:find("\0-H" .. (" "):rep(#"proxy-authorization:Basic s3cret-attached") .. "\0", 1, true))
      -- and the request still carries them
      local req = srv:requests_on("/hang")[1]
      assert.are.equal("Bearer s3cret-token", req.headers.authorization)
      assert.are.equal("session=s3cret-cookie", req.headers.cookie)
    end)

    it("luaretry fleet --redis: the URL's password blanked while Redis is waited on", function ()
      -- a "Redis" that never answers (the fault server, waiting for the
      -- end of an HTTP header that RESP never sends): fleet waits 5 s
      local policy = tmp .. "/budget.lua"
      proc.writefile(policy, 'name = "b"\nmax_attempts = 2\ndeadline = 10\nbudget = { max_tokens = 10 }\n')
      local port = srv.base:match(":(%d+)$")
      local redis = "redis://:s3cret-redis@127.0.0.1:" .. port .. "/0"
      local job = proc.spawn({ "fleet", policy, "--redis", redis, "--set", "fleet.command_timeout=5000",
                               "--set", "fleet.connect_timeout=5000" }, tmp)
      finally(function () job:stop() end)
      local blank = "\0--redis\0" .. (" "):rep(#redis) .. "\0"
      local cmdline = proc.wait_for(function ()
        local c = proc.readfile("/proc/" .. job.pid .. "/cmdline")
        return c and c:find(blank, 1, true) and c
      end, 4)
      assert.is_truthy(cmdline, proc.readfile("/proc/" .. job.pid .. "/cmdline"))
      assert.is_nil(cmdline:find("s3cret", 1, true), cmdline)
      assert.are.equal(1, job:wait(15))  -- no reply in time
      assert.matches("redis://%*%*%*@127%.0%.0%.1:%d+/0: [%w ]*:? ?no reply in time", job:stderr())
    end)
  end)

  describe("--log-json", function ()
    local FIELDS = { "attempt", "status", "error", "verdict", "wait", "elapsed", "rule",
                     "wait_source" }

    local function log_of(path, seed)
      local file = tmp .. "/log-" .. seed .. ".json"
      local r = proc.run({ "run", HTTP, url(path), "--set", "max_attempts=4",
                           "--set", "backoff.initial=0.02", "--set", "backoff.jitter_max=0.05",
                           "--seed", tostring(seed), "--log-json", file }, { timeout = 30 })
      local entries = {}
      for _, line in ipairs(proc.lines(proc.readfile(file))) do
        entries[#entries + 1] = proc.json.decode(line)
      end
      -- the log ends with one summary object: the rest are attempts
      local summary = table.remove(entries)
      assert.is_true(summary.summary, "no summary object at the end")
      assert.are.equal(#entries, summary.attempts)
      assert.are.equal(r.code, summary.exit)
      return entries, r, summary
    end

    it("two runs with --seed 7 wait exactly the same", function ()
      local a, ra = log_of("/always503", 7)
      local b, rb = log_of("/always503", 7)
      assert.are.equal(4, ra.code)
      assert.are.equal(4, rb.code)
      assert.are.equal(4, #a)
      assert.are.equal(4, #b)
      local waits_a, waits_b = {}, {}
      for i = 1, 4 do waits_a[i], waits_b[i] = a[i].wait, b[i].wait end
      assert.are.same(waits_a, waits_b)
      assert.is_true(waits_a[1] > 0)
      assert.are.equal(0, waits_a[4])
      local c = log_of("/always503", 8)
      assert.are_not.same(waits_a, { c[1].wait, c[2].wait, c[3].wait, c[4].wait })
    end)

    it("every line is a JSON object with the documented fields", function ()
      local entries, r = log_of("/reset-then-ok", 1)
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(2, #entries)
      for i, e in ipairs(entries) do
        for _, k in ipairs(FIELDS) do
          assert.is_true(e[k] ~= nil, "field " .. k .. " missing in line " .. i)
        end
        assert.are.equal(i, e.attempt)
        assert.is_number(e.wait)
        assert.is_number(e.elapsed)
        assert.is_string(e.rule)
      end
      assert.are.equal("reset", entries[1].error)
      assert.are.equal("retry", entries[1].verdict)
      assert.are.equal("backoff", entries[1].wait_source)
      assert.is_true(entries[1].wait > 0)
      assert.are.equal(proc.null, entries[2].error)
      assert.are.equal(200, entries[2].status)
      assert.are.equal("success", entries[2].verdict)
      assert.are.equal(0, entries[2].wait)
      assert.are.equal(proc.null, entries[2].wait_source)
      assert.is_true(entries[2].elapsed >= entries[1].wait)
    end)

    it("- writes the lines to standard error", function ()
      local r = run({ "run", HTTP, url("/flaky"), "--log-json", "-", "-q" })
      assert.are.equal(0, r.code)
      local lines = proc.lines(r.stderr)
      assert.are.equal(4, #lines, r.stderr)  -- three attempts and the summary
      for i = 1, 3 do assert.are.equal(i, proc.json.decode(lines[i]).attempt) end
      assert.is_true(proc.json.decode(lines[4]).summary)
    end)
  end)

  describe("-- COMMAND", function ()
    it("retries status 3 three times, exits 4, prints only the last attempt's output", function ()
      local counter = tmp .. "/count"
      local script = "echo x >> " .. proc.q(counter) ..
                     "; n=$(wc -l < " .. proc.q(counter) .. "); echo \"out $n\"; echo \"err $n\" >&2; exit 3"
      local r = proc.run({ "run", RUN .. "retry3.lua", "--", "sh", "-c", script }, { timeout = 30 })
      assert.are.equal(4, r.code, r.stderr)
      assert.are.equal("x\nx\nx\n", proc.readfile(counter))
      assert.are.equal("out 3\n", r.stdout)
      assert.matches("attempt 3/3: exit 3 %-> exhausted", r.stderr)
    end)

    it("a status the policy does not retry is final at once (exit 1)", function ()
      local counter = tmp .. "/count"
      local r = proc.run({ "run", RUN .. "retry3.lua", "--", "sh", "-c",
                           "echo x >> " .. proc.q(counter) .. "; echo done; exit 2" },
                         { timeout = 30 })
      assert.are.equal(1, r.code, r.stderr)
      assert.are.equal("x\n", proc.readfile(counter))
      assert.are.equal("done\n", r.stdout)
    end)
  end)

  describe("demo", function ()
    it("exits 0 and shows the four outcomes", function ()
      local r = proc.run({ "demo" }, { timeout = 30 })
      assert.are.equal(0, r.code, r.stderr)
      assert.matches("attempt 1/10: 503 %-> retry", r.stderr)
      assert.matches("attempt 2/10: reset error %-> retry", r.stderr)
      assert.matches("attempt 3/10: 429 %-> retry", r.stderr)
      assert.matches("attempt 4/10: 200 %-> success", r.stderr)
      assert.matches("hello from the fault server", r.stdout)
    end)
  end)

  describe("headers", function ()
    it("-H 'X-Token: abc' reaches the server", function ()
      local r = run({ "run", HTTP, url("/new"), "-H", "X-Token: abc" })
      assert.are.equal(0, r.code, r.stderr)
      local seen = srv:requests_on("/new")
      assert.are.equal(1, #seen)
      assert.are.equal("abc", seen[1].headers["x-token"])
    end)

    it("credentials never appear in stderr nor in --log-json, even with -v", function ()
      local log = tmp .. "/log.json"
      local u = "http://user:pw-s3cret-3@127.0.0.1:" .. srv.port .. "/flaky"
      local r = run({ "run", HTTP, u, "-v", "--log-json", log,
                      "-H", "Authorization: Bearer tok-s3cret-1",
                      "-H", "Cookie: sid=cookie-s3cret-2" })
      local r2 = run({ "run", HTTP, u, "-v", "--log-json", "-",
                       "-H", "Authorization: Bearer tok-s3cret-1",
                       "-H", "Cookie: sid=cookie-s3cret-2" })
      assert.are.equal(0, r.code, r.stderr)
      local seen = srv:requests_on("/flaky")
      assert.are.equal("Bearer tok-s3cret-1", seen[1].headers.authorization)
      assert.are.equal("sid=cookie-s3cret-2", seen[1].headers.cookie)
      for _, text in ipairs({ r.stderr, proc.readfile(log), r2.stderr }) do
        assert.is_true(#text > 0)
        assert.is_nil(text:find("s3cret", 1, true), text)
      end
    end)
  end)

  describe("errors", function ()
    it("usage errors exit 2", function ()
      local cases = {
        { "run", HTTP, url("/new"), "--frobnicate" },
        { "run", HTTP, "ht tp://nowhere" },
        { "run", HTTP, "ftp://127.0.0.1/" },
        { "run" },
        { "run", HTTP },
        { "run", HTTP, url("/new"), "--seed", "-1" },
        { "run", HTTP, url("/new"), "-H" },
        { "run", HTTP, url("/new"), "-H", "" },
        { "run", HTTP, url("/new"), "-H", "no colon" },
      }
      for _, args in ipairs(cases) do
        local r = proc.run(args, { timeout = 10 })
        assert.are.equal(2, r.code, table.concat(args, " ") .. ": " .. r.stderr)
        assert.matches("usage:", r.stderr)
      end
      assert.are.equal(0, #srv:requests())
    end)

    it("-d @FILE that cannot be read exits 2 and leaves -o FILE alone", function ()
      local out = tmp .. "/out.txt"
      proc.writefile(out, "old\n")
      local r = run({ "run", HTTP, url("/new"), "-d", "@" .. tmp .. "/missing", "-o", out })
      assert.are.equal(2, r.code, r.stderr)
      assert.matches("missing", r.stderr)
      assert.are.equal("old\n", proc.readfile(out))
      assert.are.same({ "out.txt" }, proc.ls(tmp))
      assert.are.equal(0, #srv:requests())
    end)

    it("a policy that cannot be read exits 3", function ()
      local r = run({ "run", RUN .. "no_such_policy.lua", url("/new") })
      assert.are.equal(3, r.code)
      assert.matches("no_such_policy%.lua", r.stderr)
    end)

    it("a Lua error in the policy exits 3 with file:line", function ()
      local r = run({ "run", RUN .. "broken.lua", url("/always503") })
      assert.are.equal(3, r.code, r.stderr)
      assert.matches("broken%.lua:7: classifier exploded", r.stderr)
      assert.are.equal(1, #srv:requests_on("/always503"))
    end)

    it("a policy that does not compile exits 3 with file:line", function ()
      local r = run({ "run", RUN .. "syntax_error.lua", url("/new") })
      assert.are.equal(3, r.code, r.stderr)
      assert.matches("syntax_error%.lua:3:", r.stderr)
      assert.are.equal(0, #srv:requests())
    end)
  end)
end)
