-- curl's options with curl's meaning (issue 31): the retry options mapped
-- onto the policy, the harmless ones taken, and those whose meaning under
-- retries needed a decision (--limit-rate per attempt, --max-filesize
-- final, --fail-early, -f per URL, -o beside --remote-name-all, -J,
-- --parallel as a flag), each against the fault server and its request log.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
package.path = here .. "/?.lua;" .. package.path
local proc = require "support.proc"
local cjson = require "cjson"
local q = proc.q

local FAST = proc.FAST

local function run(args, fast)
  local t = { "run" }
  for _, v in ipairs(args) do t[#t + 1] = v end
  if fast ~= false then for _, v in ipairs(FAST) do t[#t + 1] = v end end
  return proc.run(t, { timeout = 60 })
end

-- luaretry run in directory dir, its exit status and standard error.
local function run_in(dir, args)
  local words = {}
  for _, v in ipairs(args) do words[#words + 1] = q(v) end
  local bin = proc.bin
  if bin:sub(1, 1) ~= "/" then bin = os.getenv("PWD") .. "/" .. bin end
  local err = dir .. "/.err"
  local code = proc.sh("cd " .. q(dir) .. " && " .. q(bin) .. " run " .. table.concat(words, " ") ..
                       " </dev/null >/dev/null 2>" .. q(err))
  local text = proc.readfile(err)
  os.remove(err)
  return code, text
end

-- --log-json's attempt objects (the summary dropped).
local function attempts(path)
  local t = {}
  for _, line in ipairs(proc.lines(proc.readfile(path) or "")) do
    local o = cjson.decode(line)
    if o.attempt and o.verdict and not o.exit then t[#t + 1] = o end
  end
  return t
end

describe("curl's options with curl's meaning", function ()
  local srv, tmp
  proc.with_server(here .. "/fixtures/curl_compat/server.lua", function (s, t) srv, tmp = s, t end)

  describe("curl's retry options, mapped onto the policy", function ()
    it("--retry N is max_attempts N+1; --retry 0 is one attempt", function ()
      local r = run({ "--retry", "2", srv.base .. "/always503" })
      assert.are.equal(4, r.code, r.stderr)
      assert.are.equal(3, #srv:requests_on("/always503"))
      srv:reset()
      r = run({ "--retry", "0", srv.base .. "/always503" })
      assert.are.equal(4, r.code, r.stderr)
      assert.are.equal(1, #srv:requests_on("/always503"))
      assert.matches("gave up after 1 attempt over", r.stderr, 1, true)
    end)

    it("--retry-delay S is a constant backoff of S, no jitter", function ()
      local log = tmp .. "/log.json"
      local r = run({ "--retry", "3", "--retry-delay", "0.2", "--log-json", log,
                      srv.base .. "/always503" }, false)
      assert.are.equal(4, r.code, r.stderr)
      local a = attempts(log)
      assert.are.equal(4, #a)
      for i = 1, 3 do
        assert.are.equal(0.2, a[i].wait, "attempt " .. i)
        assert.are.equal("backoff", a[i].wait_source or a[i].wait_from or "backoff")
      end
      assert.are.equal(0, a[4].wait)
    end)

    it("--retry-delay 0 keeps the policy's backoff, as curl's 0 keeps its default", function ()
      -- the policy's: exponential from 0.05 s, no jitter (a delay of 0
      -- made every wait 0: six requests back to back)
      local log = tmp .. "/log.json"
      local r = run({ "--retry", "2", "--retry-delay", "0", "--set", "backoff.initial=0.05",
                      "--set", "backoff.jitter=none", "--log-json", log, srv.base .. "/always503" }, false)
      assert.are.equal(4, r.code, r.stderr)
      local a = attempts(log)
      assert.are.equal(3, #a)
      assert.are.same({ 0.05, 0.1 }, { a[1].wait, a[2].wait })
    end)

    it("the last --retry-delay wins, as curl's, a 0 too", function ()
      local log = tmp .. "/log.json"
      local r = run({ "--retry", "2", "--retry-delay", "5", "--retry-delay", "0", "--set", "backoff.initial=0.05",
                      "--set", "backoff.jitter=none", "--log-json", log, srv.base .. "/always503" }, false)
      assert.are.equal(4, r.code, r.stderr)
      local a = attempts(log)
      assert.are.same({ 0.05, 0.1 }, { a[1].wait, a[2].wait })
      r = run({ "--retry", "1", "--retry-delay", "5", "--retry-delay", "0.1", "--log-json", log,
                srv.base .. "/always503" }, false)
      assert.are.equal(4, r.code, r.stderr)
      assert.are.equal(0.1, attempts(log)[1].wait)
    end)

    it("--retry-delay S is every wait, a throttled one (429) too, as curl's", function ()
      local log = tmp .. "/log.json"
      -- (rate=none: the http policy's adaptive pacing of 429s is a guard of
      -- its own, which may ask for longer)
      local r = run({ "--retry", "2", "--retry-delay", "0.2", "--set", "rate=none", "--log-json", log,
                      srv.base .. "/always429" }, false)
      assert.are.equal(4, r.code, r.stderr)
      local a = attempts(log)
      assert.are.equal(3, #a)
      for i = 1, 2 do
        assert.are.equal(0.2, a[i].wait, "attempt " .. i)
        assert.are.equal("throttle", a[i].wait_source, "attempt " .. i)
      end
    end)

    it("--retry-delay S above the policy's backoff.max loads: S is the cap too (http's 32, command's 30)", function ()
      -- a wait of 60 s would pass the 5 s deadline: the run stops at once,
      -- and says when the retry would have come (no 60 s wait here)
      local r = run({ "--retry", "1", "--retry-delay", "60", "--retry-max-time", "5", srv.base .. "/always503" }, false)
      assert.are.equal(5, r.code, r.stderr)
      assert.matches("the next attempt would start at 60%.%d+ s, past the deadline", r.stderr)
      r = proc.run({ "run", "--retry", "1", "--retry-delay", "60", "--retry-max-time", "5", "--", "sh", "-c", "exit 1" },
                   { timeout = 60 })
      assert.are.equal(5, r.code, r.stderr)
      assert.matches("the next attempt would start at 60%.%d+ s, past the deadline", r.stderr)
      assert.is_nil(r.stderr:find("below backoff.initial", 1, true))
    end)

    it("--retry-all-errors retries what the policy calls final, but never a POST without a key", function ()
      local r = run({ "--retry", "2", srv.base .. "/400" })
      assert.are.equal(1, r.code, r.stderr)
      assert.are.equal(1, #srv:requests_on("/400"))
      srv:reset()
      r = run({ "--retry", "2", "--retry-all-errors", srv.base .. "/400" })
      assert.are.equal(4, r.code, r.stderr)
      assert.are.equal(3, #srv:requests_on("/400"))
      srv:reset()
      r = run({ "--retry", "2", "--retry-all-errors", "-d", "x=1", srv.base .. "/400" })
      assert.are_not.equal(0, r.code)
      assert.are.equal(1, #srv:requests_on("/400"))
      srv:reset()
      r = run({ "--retry", "2", "--retry-all-errors", "-d", "x=1", "-H", "Idempotency-Key: k1",
                srv.base .. "/400" })
      assert.are.equal(3, #srv:requests_on("/400"))
    end)

    it("--retry-all-errors works with every shipped HTTP policy and a policy of the user's own", function ()
      local own = tmp .. "/own.lua"
      -- no options, no is_transient, no is_idempotent: the default rules
      proc.writefile(own, 'name = "own"\nmax_attempts = 3\ndeadline = 30\n')
      local policies = { "http", "gcs", "iam", "azure", "azure-batch", "azure-interactive",
                         "memorystore", own }
      for _, p in ipairs(policies) do
        local path = "/once404/" .. p:gsub("[^%w-]", "_")
        local r = run({ p, "--retry-all-errors", srv.base .. path })
        assert.are.equal(0, r.code, p .. ": " .. r.stderr)
        assert.are.equal(2, #srv:requests_on(path), p)
        -- without it, the 404 is final
        r = run({ p, srv.base .. path .. "/plain" })
        assert.are.equal(1, r.code, p .. ": " .. r.stderr)
        assert.are.equal(1, #srv:requests_on(path .. "/plain"), p)
        -- a POST without a key is never repeated, whatever the policy
        r = run({ p, "--retry-all-errors", "-d", "x=1", srv.base .. path .. "/post" })
        assert.are.equal(1, r.code, p .. ": " .. r.stderr)
        assert.are.equal(1, #srv:requests_on(path .. "/post"), p)
      end
      -- the field as --set spells it, and as the Lua module reads it
      local r = run({ own, "--set", "retry_all_errors=true", srv.base .. "/once404/set" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(2, #srv:requests_on("/once404/set"))
      -- http's and command's old option: read as the field until 1.0, said once
      r = run({ "iam", "--set", "options.retry_all_errors=true", srv.base .. "/once404/old" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(2, #srv:requests_on("/once404/old"))
      assert.matches("options.retry_all_errors: renamed retry_all_errors", r.stderr, 1, true)
    end)

    it("a policy that cannot take what an option sets: the option is named, not only the field", function ()
      -- iam has no options.retry_exit_codes (only command does)
      local r = run({ "iam", "--retry-on-exit", "75", "--", "true" })
      assert.are.equal(3, r.code, r.stderr)
      assert.matches("luaretry: iam loads without --retry-on-exit (options.retry_exit_codes=75)", r.stderr, 1, true)
      -- a hedge's delay cannot reach past --max-time's attempt_timeout
      local policy = tmp .. "/hedged.lua"
      proc.writefile(policy, 'name = "hedged"\nmax_attempts = 3\ndeadline = 30\nhedge = { delay = 2 }\n')
      r = run({ policy, "--retry", "2", "--max-time", "1", srv.base .. "/ok" })
      assert.are.equal(3, r.code, r.stderr)
      assert.matches("hedge.delay: 2 s is not below attempt_timeout (1 s)", r.stderr, 1, true)
      assert.matches("loads without --max-time (attempt_timeout=1):", r.stderr, 1, true)
      assert.is_nil(r.stderr:find("--retry (", 1, true), r.stderr) -- not the one in the way
      -- not theirs: no such line
      r = run({ policy, "--max-time", "1", "--set", "nosuch=1", srv.base .. "/ok" })
      assert.are.equal(3, r.code, r.stderr)
      assert.is_nil(r.stderr:find("loads without", 1, true), r.stderr)
      assert.are.equal(0, #srv:requests_on("/ok"))
    end)

    it("--retry-connrefused is taken: a refused connection is retried already", function ()
      local r = run({ "--retry", "1", "--retry-connrefused", "http://127.0.0.1:1/" })
      assert.are.equal(4, r.code, r.stderr)
      assert.matches("attempt 2/2: connect error", r.stderr, 1, true)
    end)

    it("a bad --retry or --retry-delay is a usage error naming the option", function ()
      for _, args in ipairs({ { "--retry", "x" }, { "--retry", "-1" }, { "--retry-delay", "soon" } }) do
        local r = run({ args[1], args[2], srv.base .. "/ok" })
        assert.are.equal(2, r.code, args[1])
        assert.matches("run: " .. args[1]:gsub("%-", "%%-") .. " " .. args[2]:gsub("%-", "%%-") .. ": expected",
                       r.stderr)
      end
      -- out of range: the message names the range, not only its low end
      local r = run({ "--retry", "99999999999", srv.base .. "/ok" })
      assert.are.equal(2, r.code, r.stderr)
      assert.matches("run: --retry 99999999999: expected a whole number of retries from 0 to 100000", r.stderr, 1, true)
      r = run({ "--retry-delay", "1e7", srv.base .. "/ok" })
      assert.are.equal(2, r.code, r.stderr)
      assert.matches("run: --retry-delay 1e7: expected seconds from 0 to 1000000", r.stderr, 1, true)
      assert.are.equal(0, #srv:requests_on("/ok"))
    end)
  end)

  describe("--parallel is curl's flag", function ()
    it("runs a batch at once, as -Z", function ()
      local r = run({ "--parallel", srv.base .. "/a", srv.base .. "/b" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("done /a\ndone /b\n", r.stdout)
    end)

    it("a number after it is a usage error that names --parallel-max N; no URL is fetched", function ()
      local r = run({ "--parallel", "8", srv.base .. "/a" })
      assert.are.equal(2, r.code)
      assert.matches("--parallel is curl's flag (-Z) and takes no number: --parallel-max 8", r.stderr, 1, true)
      assert.are.equal(0, #srv:requests_on("/a"))
    end)
  end)

  describe("options taken with curl's meaning", function ()
    it("--no-progress-meter, -#, -N, --http1.1 change nothing in a pipe", function ()
      for _, opt in ipairs({ "--no-progress-meter", "-#", "--progress-bar", "-N", "--no-buffer", "--http1.1", "-4" }) do
        local r = run({ opt, srv.base .. "/once503" })
        assert.are.equal(0, r.code, opt .. ": " .. r.stderr)
        assert.are.equal("done /once503\n", r.stdout, opt)
        srv:reset()
      end
    end)

    -- curl's -H: "Name: value" sends it, "Name;" sends it empty, "Name:"
    -- with nothing after sends none (libcurl's own Accept or User-Agent
    -- removed: `-H 'Expect:'` is the common one); the same flags given to
    -- curl itself, on this machine, are the reference
    -- curl's -w escapes are \n, \r and \t alone: any other pair, \\ too,
    -- is printed as it is (ours read \\ as one \, so "\\n" was a newline)
    it("-w: the escapes curl's are, byte for byte with curl's own output", function ()
      local fmt = "a\\\\b|\\q|\\\\n|\\t|%{http_code}\\"
      local ours = run({ srv.base .. "/ok", "-s", "-o", "/dev/null", "-w", fmt })
      assert.are.equal(0, ours.code, ours.stderr)
      local curls = proc.readfile_cmd("env -u LD_PRELOAD curl -s --max-time 5 -o /dev/null -w " ..
                                      q(fmt) .. " " .. q(srv.base .. "/ok"))
      assert.are.equal("a\\\\b|\\q|\\\\n|\t|200\\", curls) -- this machine's curl, pinned
      assert.are.equal(curls, ours.stdout)
    end)

    it("-H 'Name:' removes a header, 'Name;' sends it empty, on every attempt, as curl does", function ()
      local flags = { "-H", "Accept:", "-H", "User-Agent:  ", "-H", "X-Gone:", "-H", "X-Empty;",
                      "-H", "X-Kept: v" }
      srv:reset()
      local r = run({ srv.base .. "/once503", table.unpack(flags) })
      assert.are.equal(0, r.code, r.stderr)
      local words = {}
      for _, f in ipairs(flags) do words[#words + 1] = q(f) end
      proc.readfile_cmd("env -u LD_PRELOAD curl -sS --max-time 5 -o /dev/null " ..
                        table.concat(words, " ") .. " " .. q(srv.base .. "/hdr-curl"))
      local ours, curls = srv:requests_on("/once503"), srv:requests_on("/hdr-curl")
      assert.are.equal(2, #ours)
      assert.are.equal(1, #curls)
      for _, seen in ipairs { ours[1], ours[2], curls[1] } do
        local h = seen.headers
        assert.is_nil(h.accept)
        assert.is_nil(h["user-agent"])
        assert.is_nil(h["x-gone"])
        assert.are.equal("", h["x-empty"])
        assert.are.equal("v", h["x-kept"])
      end
      -- through a policy's prepare (gcs.lua adds its own headers), which
      -- never sees a removed header: still removed
      r = proc.run({ "run", "gcs", srv.base .. "/hdr-gcs", "-H", "Accept:", "-H", "X-Kept: v" })
      assert.are.equal(0, r.code, r.stderr)
      local h = srv:requests_on("/hdr-gcs")[1].headers
      assert.is_nil(h.accept)
      assert.are.equal("v", h["x-kept"])
      assert.matches("gccl%-invocation%-id/", h["x-goog-api-client"])
    end)

    it("-e sends a Referer on every attempt; --http2 asks to upgrade a plain connection, --http1.1 does not", function ()
      local r = run({ "-e", "https://example.test/page", srv.base .. "/once503" })
      assert.are.equal(0, r.code, r.stderr)
      local seen = srv:requests_on("/once503")
      assert.are.equal(2, #seen)
      for _, s in ipairs(seen) do assert.are.equal("https://example.test/page", s.headers.referer) end
      r = run({ "--http2", srv.base .. "/h2" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("h2c", srv:requests_on("/h2")[1].headers.upgrade)
      r = run({ "--http1.1", srv.base .. "/h1" })
      assert.is_nil(srv:requests_on("/h1")[1].headers.upgrade)
    end)

    it("-6 asks for IPv6 only: an IPv4 address is not reached", function ()
      local r = run({ "-6", "--retry", "0", srv.base .. "/v6" })
      assert.are_not.equal(0, r.code)
      assert.are.equal(0, #srv:requests_on("/v6"))
    end)

    it("--max-filesize: a larger body is final (too_large), never retried, no file", function ()
      local out = tmp .. "/big"
      local r = run({ "--max-filesize", "1k", "-o", out, srv.base .. "/big" })
      assert.are.equal(1, r.code, r.stderr)
      assert.matches("too_large", r.stderr, 1, true)
      assert.are.equal(1, #srv:requests_on("/big"))
      assert.is_nil(proc.readfile(out))
      srv:reset()
      r = run({ "--max-filesize", "200000", "-o", out, srv.base .. "/big" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(100000, #proc.readfile(out))
    end)

    describe("--max-filesize without a stated length (libcurl 7.88 checks a Content-Length only)", function ()
      it("a longer body fails the attempt as too_large: final, no file, nothing on standard output", function ()
        for _, case in ipairs({ { "/nolength", "1k" }, { "/chunked", "10000" } }) do
          local path, most = case[1], case[2]
          local out = tmp .. "/out"
          local r = run({ "--max-filesize", most, "-o", out, "-w", "%{verdict} %{num_attempts}", srv.base .. path })
          assert.are.equal(1, r.code, path .. ": " .. r.stderr)
          assert.matches("attempt 1/10: too_large error -> final", r.stderr, 1, true)
          assert.are.equal("final 1", r.stdout, path)
          assert.are.equal(1, #srv:requests_on(path))
          assert.is_nil(proc.readfile(out), path .. ": nothing half-written")
          assert.are.same({}, proc.ls(tmp), path .. ": no temporary left")
          r = run({ "--max-filesize", most, srv.base .. path })
          assert.are.equal(1, r.code, path .. ": " .. r.stderr)
          assert.are.equal("", r.stdout, path)
        end
      end)

      it("a body within it is written whole", function ()
        local out = tmp .. "/out"
        local r = run({ "--max-filesize", "1m", "-o", out, srv.base .. "/nolength" })
        assert.are.equal(0, r.code, r.stderr)
        assert.are.equal(1048576, #proc.readfile(out))
        r = run({ "--max-filesize", "16384", "-o", out, srv.base .. "/chunked" })
        assert.are.equal(0, r.code, r.stderr)
        assert.are.equal(16384, #proc.readfile(out))
      end)

      it("is judged by the policy: one that retries too_large makes every attempt", function ()
        local policy = tmp .. "/retry_all.lua"
        proc.writefile(policy, 'name = "retry_all"\nmax_attempts = 3\ndeadline = 30\n' ..
                               'backoff = { initial = 0.01, jitter = "none" }\n' ..
                               'function is_transient() return true end\n')
        local log, out = tmp .. "/log.json", tmp .. "/out"
        local r = run({ policy, "--max-filesize", "1k", "-o", out, "--log-json", log, srv.base .. "/nolength" }, false)
        assert.are.equal(4, r.code, r.stderr)
        assert.are.equal(3, #srv:requests_on("/nolength"))
        local a = attempts(log)
        assert.are.equal(3, #a)
        for i = 1, 3 do assert.are.equal("too_large", a[i].error, "attempt " .. i) end
        assert.is_nil(proc.readfile(out))
      end)

      it("in a batch: that URL fails as too_large, the others are written", function ()
        local dir = tmp .. "/dir"
        local r = run({ "--max-filesize", "1k", "--create-dirs", "--output-dir", dir,
                        srv.base .. "/nolength", srv.base .. "/ok" })
        assert.are.equal(1, r.code, r.stderr)
        assert.matches("[1] " .. srv.base .. "/nolength: final, 1 attempt, status too_large error", r.stderr, 1, true)
        assert.are.same({ "ok" }, proc.ls(dir))
        assert.are.equal(1, #srv:requests_on("/nolength"))
      end)

      it("in a batch to standard output: nothing of that URL's body is shown", function ()
        local r = run({ "--max-filesize", "10000", srv.base .. "/chunked", srv.base .. "/ok" })
        assert.are.equal(1, r.code, r.stderr)
        assert.are.equal("ok\n", r.stdout)
      end)

      it("in a batch, a policy that retries too_large starts each attempt from zero: the limit holds", function ()
        local policy = tmp .. "/retry_all.lua"
        proc.writefile(policy, 'name = "retry_all"\nmax_attempts = 4\ndeadline = 30\n' ..
                               'backoff = { initial = 0.01, jitter = "none" }\n' ..
                               'function is_transient() return true end\n')
        local dir = tmp .. "/dir"
        local r = run({ policy, "--max-filesize", "6000", "--create-dirs", "--output-dir", dir,
                        srv.base .. "/ranged", srv.base .. "/ok" }, false)
        assert.are.equal(4, r.code, r.stderr)
        assert.matches(": exhausted, 4 attempts, status too_large error", r.stderr, 1, true)
        assert.are.same({ "ok" }, proc.ls(dir))
        local seen = srv:requests_on("/ranged")
        assert.are.equal(4, #seen)
        for i = 1, 4 do assert.is_nil(seen[i].headers.range, "attempt " .. i .. " asked for a range") end
      end)

      it("in a batch as for one URL: the attempt is reported, so the breaker counts it", function ()
        local policy = tmp .. "/large_breaker.lua"
        proc.writefile(policy, 'name = "large_breaker"\nmax_attempts = 5\ndeadline = 30\n' ..
                               'backoff = { initial = 0.01, jitter = "none" }\n' ..
                               'breaker = { failures = 2, open_seconds = 60 }\n' ..
                               'function is_transient() return true end\n')
        local one = run({ policy, "--max-filesize", "1k", "-o", tmp .. "/one", srv.base .. "/nolength" }, false)
        assert.are.equal(6, one.code, one.stderr)
        assert.are.equal(2, #srv:requests_on("/nolength"))
        srv:reset()
        local dir = tmp .. "/dir"
        local r = run({ policy, "--max-filesize", "1k", "--create-dirs", "--output-dir", dir,
                        srv.base .. "/nolength" }, false)
        assert.are.equal(6, r.code, r.stderr)
        assert.are.equal(2, #srv:requests_on("/nolength"))
        assert.matches(": circuit_open, 2 attempts, status too_large error", r.stderr)
        assert.are.same({}, proc.ls(dir))
      end)

      it("with a workflow (a policy with run()): refused, never ignored", function ()
        -- the script's requests keep their bodies whole for it (up to 16 MiB):
        -- no sink counts them, so the limit could not hold for this body
        local wf = proc.root .. "/spec/fixtures/workflow/endless_run.lua"
        local r = run({ wf, "--max-filesize", "1k", srv.base .. "/nolength" }, false)
        assert.are.equal(2, r.code, r.stderr)
        assert.matches("run: --max-filesize is for URLs", r.stderr, 1, true)
        assert.are.equal("", r.stdout)
        assert.are.equal(0, #srv:requests_on("/nolength"))
      end)

      it("with a workflow: every option only a URL's transfer reads is refused, named", function ()
        local wf = proc.root .. "/spec/fixtures/workflow/endless_run.lua"
        local cases = {
          { "-X", "PUT" }, { "-d", "x" }, { "-H", "A: b" }, { "-i" }, { "-D", "-" },
          { "-w", "%{http_code}" }, { "-f" }, { "-C", "-", "-o", tmp .. "/c" },
          { "--checksum", "sha-256=" .. ("0"):rep(64) }, { "-O" }, { "-O", "-J" },
          { "-T", "/dev/null" }, { "-F", "a=b" }, { "-G" }, { "--max-filesize", "1k" },
          { "--urls", "/dev/null" }, { "--output-dir", tmp }, { "--parallel" },
          -- each named as typed, never as the option it sets (-I is not -X)
          { "-I" }, { "--head" }, { "--request", "PUT" }, { "-Z" }, { "--parallel-max", "2" },
          { "--remote-name-all" }, { "--remote-name" }, { "--data-binary", "x" }, { "--data-raw", "x" },
          { "--form-string", "a=b" }, { "--form", "a=b" }, { "--header", "A: b" }, { "--include" },
          { "--dump-header", "-" }, { "--write-out", "%{http_code}" }, { "--fail" }, { "--get" },
          { "--continue-at", "-", "-o", tmp .. "/c" }, { "--upload-file", "/dev/null" },
          { "--data", "x" }, { "-O", "--remote-header-name" },
          -- and none ignored: of a URL's answer, and of a batch
          { "--fail-with-body" }, { "--fail-early" },
        }
        for _, c in ipairs(cases) do
          local args = { wf }
          for _, w in ipairs(c) do args[#args + 1] = w end
          args[#args + 1] = srv.base .. "/nolength"
          local r = run(args, false)
          local what = table.concat(c, " ")
          assert.are.equal(2, r.code, what .. ": " .. r.stderr)
          assert.matches("run: " .. c[1] .. " is for URLs; ", r.stderr, 1, true)
        end
        assert.are.equal(0, #srv:requests_on("/nolength"))
      end)
    end)

    it("--limit-rate paces each attempt (a lower bound only: a busy machine is slower, never faster)", function ()
      -- 25 MiB at 10 MiB/s: 2.5 s for the attempt that succeeds (50 ms unpaced)
      local r = run({ "--limit-rate", "10M", "-w", "%{time_total} %{size_download}", "-o", "/dev/null",
                      srv.base .. "/stream" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(2, #srv:requests_on("/stream"))
      local secs, size = r.stdout:match("^(%S+) (%d+)$")
      assert.are.equal(26214400, tonumber(size))
      assert.is_true(tonumber(secs) >= 1.5, r.stdout)
    end)

    it("--limit-rate 0, garbage, --max-filesize 0: usage errors naming the option", function ()
      for _, args in ipairs({ { "--limit-rate", "0" }, { "--limit-rate", "fast" }, { "--limit-rate", "10q" },
                              { "--max-filesize", "0" }, { "--max-filesize", "-5" } }) do
        local r = run({ args[1], args[2], srv.base .. "/ok" })
        assert.are.equal(2, r.code, table.concat(args, " "))
        assert.matches("run: " .. args[1]:gsub("%-", "%%-") .. " " .. args[2]:gsub("%-", "%%-") .. ": expected bytes above 0",
                       r.stderr)
      end
    end)

    it("-f in a batch: a failed URL's answer is not written, URL by URL", function ()
      local r = run({ "-f", srv.base .. "/a", srv.base .. "/404", srv.base .. "/b" })
      assert.are.equal(1, r.code, r.stderr)
      assert.are.equal("done /a\ndone /b\n", r.stdout)
      r = run({ srv.base .. "/a", srv.base .. "/404" })
      assert.are.equal("done /a\nno such thing\n", r.stdout)
    end)

    it("--fail-early: a batch begins no URL after its first final failure", function ()
      local r = run({ "--fail-early", srv.base .. "/a", srv.base .. "/404", srv.base .. "/b", srv.base .. "/c" })
      assert.are.equal(1, r.code, r.stderr)
      assert.are.equal(1, #srv:requests_on("/a"))
      assert.are.equal(0, #srv:requests_on("/b"))
      assert.are.equal(0, #srv:requests_on("/c"))
      assert.matches("--fail-early: [2] failed; the URLs from [3] on were not begun", r.stderr, 1, true)
      r = run({ srv.base .. "/404", srv.base .. "/b" })
      assert.are.equal(1, #srv:requests_on("/b"))
    end)

    it("-o beside --remote-name-all names its own URL's file; the others keep their names", function ()
      local code, err = run_in(tmp, { "--remote-name-all", "-o", "first.txt", srv.base .. "/x/one.txt",
                                      srv.base .. "/y/two.txt", "--seed", "1" })
      assert.are.equal(0, code, err)
      assert.are.equal("done /x/one.txt\n", proc.readfile(tmp .. "/first.txt"))
      assert.are.equal("done /y/two.txt\n", proc.readfile(tmp .. "/two.txt"))
      assert.is_nil(proc.readfile(tmp .. "/one.txt"))
    end)

    -- a later URL of the same name wrote over -o's file (luaretry(1): a
    -- name already given gets .1)
    it("-o beside --remote-name-all: a later URL of -o's name gets .1, never writes over it", function ()
      local code, err = run_in(tmp, { "--remote-name-all", "-o", "one.txt", srv.base .. "/x/first",
                                      srv.base .. "/y/one.txt", "--seed", "1" })
      assert.are.equal(0, code, err)
      assert.are.equal("done /x/first\n", proc.readfile(tmp .. "/one.txt"))
      assert.are.equal("done /y/one.txt\n", proc.readfile(tmp .. "/one.txt.1"))
      code, err = run_in(tmp, { "--remote-name-all", "-o", tmp .. "/two.txt", srv.base .. "/x/first",
                                srv.base .. "/y/two.txt", "--seed", "1" })
      assert.are.equal(0, code, err)
      assert.are.equal("done /x/first\n", proc.readfile(tmp .. "/two.txt"))
      assert.are.equal("done /y/two.txt\n", proc.readfile(tmp .. "/two.txt.1"))
    end)

    it("-J with -O: the file is named by Content-Disposition, never written over one there", function ()
      local code, err = run_in(tmp, { "-OJ", srv.base .. "/download" })
      assert.are.equal(0, code, err)
      assert.are.equal("the file\n", proc.readfile(tmp .. "/report.txt"))
      assert.is_nil(proc.readfile(tmp .. "/download"))
      code, err = run_in(tmp, { "-O", "-J", srv.base .. "/download" })
      assert.are.equal(1, code)
      assert.matches("report.txt is not written over", err, 1, true)
      assert.are.equal("the file\n", proc.readfile(tmp .. "/download"))
      code, err = run_in(tmp, { "-J", srv.base .. "/download" })
      assert.are.equal(2, code)
      assert.matches("-J goes with -O", err, 1, true)
    end)

    -- -J with several URLs was refused ("-J takes one URL"), where curl
    -- takes it and neither luaretry(1) nor --help said so
    it("-J with -O and several URLs: each file named by its answer's Content-Disposition", function ()
      local code, err = run_in(tmp, { "-O", "-J", srv.base .. "/download", srv.base .. "/same/file.txt",
                                      srv.base .. "/x/plain" })
      assert.are.equal(0, code, err)
      assert.are.same({ "file.txt", "plain", "report.txt" }, proc.ls(tmp))
      assert.are.equal("the file\n", proc.readfile(tmp .. "/report.txt"))
      assert.are.equal("the same file\n", proc.readfile(tmp .. "/file.txt"))
      -- a name there already is never written over: that URL exits 1, its
      -- body under the URL's name
      code, err = run_in(tmp, { "-O", "-J", "-q", srv.base .. "/download", srv.base .. "/x/other" })
      assert.are.equal(1, code, err)
      assert.matches("[1] -J: ./report.txt is not written over; the body is in ./download", err, 1, true)
      assert.are.equal("the file\n", proc.readfile(tmp .. "/download"))
      assert.are.equal("the file\n", proc.readfile(tmp .. "/report.txt"))
    end)

    it("-w and -D are written when the body is not (full disk, standard output closed, -J refusing): exitcode 1", function ()
      local fmt, h = "code=%{http_code} exit=%{exitcode}\\n", tmp .. "/h.txt"
      local r = run({ "-s", "-o", "/dev/full", "-w", fmt, "-D", h, srv.base .. "/x/first" })
      assert.are.equal(1, r.code, r.stderr)
      assert.are.equal("code=200 exit=1\n", r.stdout)
      assert.matches("^HTTP/1%.1 200 ", proc.readfile(h))
      os.remove(h)
      -- run in tmp with standard output to `out` (or closed): status, stderr
      local bin = proc.bin
      if bin:sub(1, 1) ~= "/" then bin = os.getenv("PWD") .. "/" .. bin end
      local function run_to(out, args)
        local words = {}
        for _, v in ipairs(args) do words[#words + 1] = q(v) end
        local code = proc.sh("cd " .. q(tmp) .. " && env -u LD_PRELOAD " .. q(bin) .. " run " ..
                             table.concat(words, " ") .. " </dev/null " .. out .. " 2>" .. q(tmp .. "/.err"))
        local err = proc.readfile(tmp .. "/.err")
        os.remove(tmp .. "/.err")
        return code, err
      end
      local code, err = run_to(">&-", { "-w", fmt, "-D", h, srv.base .. "/x/first" })
      assert.are.equal(1, code, err)
      assert.matches("standard output: writing", err, 1, true)
      assert.matches("^HTTP/1%.1 200 ", proc.readfile(h))
      os.remove(h)
      proc.writefile(tmp .. "/report.txt", "mine\n")
      code, err = run_to(">" .. q(tmp .. "/w.txt"), { "-O", "-J", "-w", fmt, "-D", h, srv.base .. "/download" })
      assert.are.equal(1, code, err)
      assert.matches("report.txt is not written over", err, 1, true)
      assert.are.equal("code=200 exit=1\n", proc.readfile(tmp .. "/w.txt"))
      assert.matches("Content%-Disposition", proc.readfile(h))
      assert.are.equal("mine\n", proc.readfile(tmp .. "/report.txt"))
    end)

    it("-D to a full disk: exit 1 naming the file, and the file closed all the same", function ()
      local r = run({ "-D", "/dev/full", "-o", tmp .. "/out", srv.base .. "/bigheaders" })
      assert.are.equal(1, r.code, r.stderr)
      assert.matches("/dev/full: No space left on device", r.stderr, 1, true)
      -- headers longer than stdio's buffer fail at fwrite, before fclose:
      -- valgrind lists the descriptors still open at exit (glibc keeps
      -- every FILE reachable, so no leak checker sees it); not under ASan
      if proc.asan() then return end
      local vlog = tmp .. "/valgrind.log"
      r = proc.run({ { raw = "--track-fds=yes -q --log-file=" .. proc.q(vlog) }, proc.bin, "run", "-D", "/dev/full",
                     "-o", tmp .. "/out", srv.base .. "/bigheaders" }, { bin = "valgrind", plain = true, timeout = 120 })
      assert.are.equal(1, r.code, r.stderr)
      local report = proc.readfile(vlog) or ""
      assert.matches("Open file descriptor", report, 1, true) -- valgrind did look
      assert.is_nil(report:find("/dev/full", 1, true), report)
    end)

    it("-J naming the file the URL names: success, the body in it", function ()
      local code, err = run_in(tmp, { "-O", "-J", srv.base .. "/same/file.txt" })
      assert.are.equal(0, code, err)
      assert.are.equal("the same file\n", proc.readfile(tmp .. "/file.txt"))
      assert.is_nil(err:find("not written over", 1, true), err)
      -- again, over the file the first run left: -O writes over it, as curl's
      code, err = run_in(tmp, { "-O", "-J", "--output-dir", tmp, srv.base .. "/same/file.txt" })
      assert.are.equal(0, code, err)
      assert.are.same({ "file.txt" }, proc.ls(tmp))
    end)

    -- luaretry(1), -O: how the name is made from the URL's last segment
    it("-O names the file from the last segment: bytes made safe, cut at 200, index for none", function ()
      local long = ("b"):rep(250)
      local cases = {
        { "/o/" .. long, ("b"):rep(200) },
        { "/o/", "index" },
        { "/o/a%20b%2Fc$d.txt", "a_b_c_d.txt" },
        { "/o/.hidden", "_hidden" },
      }
      for _, c in ipairs(cases) do
        local dir = proc.tmpdir()
        local code, err = run_in(dir, { "-O", srv.base .. c[1] })
        assert.are.equal(0, code, err)
        assert.are.same({ c[2] }, proc.ls(dir), c[1])
        proc.rmtree(dir)
      end
    end)

    it("-q keeps luaretry's meaning (one line per failure), the one deliberate difference, said in luaretry(1)", function ()
      local r = run({ "-q", "--retry", "1", srv.base .. "/always503" })
      assert.are.equal(4, r.code)
      assert.are.equal(1, #proc.lines(r.stderr))
      local man = proc.readfile(proc.root .. "/core/cli/man/luaretry.1")
      assert.is_truthy(man:find("curlrc", 1, true))
    end)
  end)
end)
