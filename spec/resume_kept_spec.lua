-- The partial download an earlier run kept (review of issue 30, item 3):
-- it goes only on success, on a final answer, or when it no longer
-- matches; a run refused before its first attempt, one whose attempts are
-- spent on 503s, a usage error: it stays as it was, with its .url file,
-- and no error page is ever written into it.  --max-filesize never leaves
-- a refused body's bytes in -C -'s file, nor resumes after them.  Against
-- `luaretry faults`
-- (spec/fixtures/downloads/resume_trust.lua), a breaker shared through
-- --fleet local in a folder of the spec's own.
local proc = require "support.proc"
local dl = require "support.downloads"
local fleet = require "support.fleet"

local run, partial, sidecar, plant = proc.run_http, dl.partial, dl.sidecar, dl.plant
local WHOLE = dl.content(20000)
local BUSY = "the load balancer is busy\n"

local function same_bytes(want, got, what)
  assert.are.equal(#want, got and #got, (what or "") .. ": length")
  assert.is_true(want == got, (what or "") .. ": bytes differ")
end

describe("an earlier run's partial", function ()
  local srv, tmp
  proc.with_server(proc.root .. "/spec/fixtures/downloads/resume_trust.lua",
                   function (s, t) srv, tmp = s, t end)

  -- the planted partial and its .url file, as they were
  local function kept(out, url)
    same_bytes(WHOLE:sub(1, 6000), proc.readfile(partial(out)), "the partial")
    assert.are.equal(sidecar(url, '"w"'), proc.readfile(partial(out) .. ".url"))
  end

  it("stays when the Range requests get 503 until the attempts are spent", function ()
    local out, url = tmp .. "/a.bin", srv.base .. "/busy"
    plant(out, WHOLE:sub(1, 6000), url, '"w"')
    local r = run({ url, "-o", out, "--set", "max_attempts=2" })
    assert.are.equal(4, r.code, r.stderr)
    assert.matches("attempt 2/2: 503 %-> exhausted", r.stderr)
    for _, s in ipairs(dl.ranges(srv, "/busy")) do assert.are.equal("bytes=6000-", s.range) end
    kept(out, url)
    assert.is_nil(proc.readfile(out))
    assert.is_nil(r.stderr:find("restarting", 1, true))
  end)

  it("stays with --fail-with-body, the error page going to FILE alone (as curl writes it)", function ()
    local out, url = tmp .. "/b.bin", srv.base .. "/busy"
    plant(out, WHOLE:sub(1, 6000), url, '"w"')
    local r = run({ url, "-o", out, "--set", "max_attempts=2", "--fail-with-body" })
    assert.are.equal(4, r.code, r.stderr)
    assert.are.equal(BUSY, proc.readfile(out))
    kept(out, url)
    local names = proc.leftovers(tmp)
    table.sort(names)
    assert.are.same({ ".b.bin.luaretry-partial", ".b.bin.luaretry-partial.url" }, names)
  end)

  it("grows, and stays, when its ranges keep breaking: --fail-with-body puts no half file at FILE", function ()
    local out, url = tmp .. "/k.bin", srv.base .. "/cut-always"
    plant(out, WHOLE:sub(1, 6000), url, '"w"')
    local r = run({ url, "-o", out, "--set", "max_attempts=2", "--fail-with-body" })
    assert.are.equal(4, r.code, r.stderr)
    local seen = dl.ranges(srv, "/cut-always")
    assert.are.equal("bytes=6000-", seen[1].range)
    assert.are.equal("bytes=8000-", seen[2].range)
    assert.is_true(proc.readfile(out) == nil, "FILE holds half a file")
    same_bytes(WHOLE:sub(1, 10000), proc.readfile(partial(out)), "the partial")
    assert.are.equal(sidecar(url, '"w"'), proc.readfile(partial(out) .. ".url"))
  end)

  it("stays when the call is refused before attempt 1 (the fleet's breaker is open)", function ()
    local xdg = tmp .. "/run"
    assert.are.equal(0, proc.sh("mkdir -m 700 " .. proc.q(xdg)))
    local policy = tmp .. "/breaker.lua"
    proc.writefile(policy, 'name = "breaker"\nmax_attempts = 3\ndeadline = 30\n' ..
                   'attempt_timeout = 10\nbackoff = { kind = "constant", initial = 0.01, jitter = "none" }\n' ..
                   'breaker = { failures = 2, open_seconds = 600 }\n')
    local key = fleet.keys("resume-kept")()
    local function go(url, out)
      return proc.run({ "run", policy, url, "-o", out, "--fleet", "local", "--set", "fleet.key=" .. key },
                      { env = { "XDG_RUNTIME_DIR=" .. xdg }, timeout = 60 })
    end
    local first = go(srv.base .. "/busy", tmp .. "/first.bin")
    assert.are_not.equal(0, first.code, first.stderr)
    local out, url = tmp .. "/c.bin", srv.base .. "/whole"
    plant(out, WHOLE:sub(1, 6000), url, '"w"')
    local r = go(url, out)
    assert.are.equal(6, r.code, r.stderr)
    assert.matches("before attempt 1: circuit_open", r.stderr)
    assert.are.equal(0, #srv:requests_on("/whole"))
    kept(out, url)
    assert.is_nil(proc.readfile(out))
  end)

  it("stays after a usage error found once the call is set up (-w's unknown variable)", function ()
    local out, url = tmp .. "/d.bin", srv.base .. "/whole"
    plant(out, WHOLE:sub(1, 6000), url, '"w"')
    local r = run({ url, "-o", out, "-w", "%{no_such}" })
    assert.are.equal(2, r.code, r.stderr)
    assert.matches("unknown variable", r.stderr)
    kept(out, url)
    assert.is_nil(proc.readfile(out))
  end)

  it("--max-filesize below the last 503's page: exhausted (4) with -w and -D, the page shown nowhere", function ()
    local out, url, dump = tmp .. "/g.bin", srv.base .. "/busy-unsized", tmp .. "/head.txt"
    plant(out, WHOLE:sub(1, 6000), url, '"w"')
    local r = run({ url, "-o", out, "--set", "max_attempts=2", "--max-filesize", "10",
                    "--fail-with-body", "-w", "%{http_code} %{num_attempts}\n", "-D", dump })
    assert.are.equal(4, r.code, r.stderr)
    assert.is_nil(r.stderr:find("already stopped", 1, true))
    assert.are.equal("503 2\n", r.stdout)
    assert.matches("^HTTP/1.1 503", proc.readfile(dump))
    assert.is_nil(proc.readfile(out))
    kept(out, url)
    -- to standard output: nothing of the page either
    r = run({ url, "--set", "max_attempts=2", "--max-filesize", "10" })
    assert.are.equal(0, #r.stdout)
  end)

  it("stays when the 503's stated length is above --max-filesize (too_large: no word on the file)", function ()
    local out, url = tmp .. "/m.bin", srv.base .. "/busy"
    plant(out, WHOLE:sub(1, 6000), url, '"w"')
    local r = run({ url, "-o", out, "--max-filesize", "10" })
    assert.are.equal(1, r.code, r.stderr)
    assert.matches("too_large error %-> final", r.stderr)
    kept(out, url)
    assert.is_nil(proc.readfile(out))
  end)

  -- luaretry(1) -i: "a download resumed within the call: those of the
  -- answer its body began with ... -D has the last answer's, a 206"
  it("-i within a resumed call writes the headers its body began with, -D the last answer's", function ()
    local d = tmp .. "/d.txt"
    local r = run({ srv.base .. "/cut-then-busy", "-i", "-D", d, "--set", "backoff.initial=0.01" })
    assert.are.equal(0, r.code, r.stderr)
    local head, body = r.stdout:match("^(HTTP/1.1 200 .-\r\n\r\n)(.*)$")
    assert.is_truthy(head, r.stdout:sub(1, 200))
    same_bytes(WHOLE, body, "-i's body")
    assert.matches("^HTTP/1.1 206 ", proc.readfile(d))
  end)

  it("an answer with a Content-Encoding is never resumed: decoded, its bytes are not the ones a Range counts", function ()
    local out, url = tmp .. "/e.bin", srv.base .. "/encoded-cut-once"
    local r = run({ url, "-o", out, "--set", "backoff.initial=0.01" })
    assert.are.equal(0, r.code, r.stderr)
    local seen = dl.ranges(srv, "/encoded-cut-once")
    assert.are.equal(2, #seen)
    assert.is_false(seen[2].range)
    same_bytes(WHOLE, proc.readfile(out), "the file")
  end)

  it("is not kept with -i: the file's headers are no body bytes for the next run to continue from", function ()
    -- the deadline cuts the body midway (a tenth every half second):
    -- without -i the bytes are kept for the same command to continue
    local out, url = tmp .. "/i.bin", srv.base .. "/slow"
    local r = run({ url, "-i", "-o", out, "--set", "deadline=1.2" })
    assert.are.equal(5, r.code, r.stderr)
    assert.is_nil(proc.readfile(partial(out)))
    assert.is_nil(proc.readfile(partial(out) .. ".url"))
    assert.is_nil(proc.readfile(out))
    -- the same command again starts from zero: no Range, ever
    r = run({ url, "-i", "-o", out, "--set", "deadline=1.2" })
    assert.are.equal(5, r.code, r.stderr)
    local seen = dl.ranges(srv, "/slow")
    assert.are.equal(2, #seen)
    for _, q in ipairs(seen) do assert.is_false(q.range) end
    assert.is_nil(proc.readfile(partial(out)))
  end)

  it("the 503 that ends a resumed call: -i shows its headers before it, -f shows nothing", function ()
    local url = srv.base .. "/cut-then-busy-always"
    local r = run({ url, "-i", "--set", "max_attempts=2" })
    assert.are.equal(4, r.code, r.stderr)
    assert.matches("^HTTP/1.1 503 [^\n]*\r\n.*\r\n\r\n" .. BUSY .. "$", r.stdout)
    r = run({ url, "-f", "--set", "max_attempts=2" })
    assert.are.equal(4, r.code, r.stderr)
    assert.are.equal("", r.stdout)
  end)

  it("stays when the call ends final with no answer (a connection refused its policy calls final)", function ()
    local out, url = tmp .. "/g.bin", "http://127.0.0.1:1/file"
    plant(out, WHOLE:sub(1, 6000), url, '"w"')
    local policy = tmp .. "/final.lua"
    proc.writefile(policy, 'name = "final"\nmax_attempts = 3\ndeadline = 30\n' ..
                           'function is_transient() return false end\n')
    local r = proc.run({ "run", policy, url, "-o", out }, { timeout = 60 })
    assert.are.equal(1, r.code, r.stderr)
    assert.matches("attempt 1/3: connect error %-> final", r.stderr)
    kept(out, url)
    assert.is_nil(proc.readfile(out))
  end)

  -- two runs of one command at once continued the same partial: one put
  -- it in place, the other then said success and "-o FILE: No such file
  -- or directory" (exit 1), the partial gone from under it
  it("is continued by one run at a time: a second run at once starts from zero, its own temporary", function ()
    local out, url = tmp .. "/h.bin", srv.base .. "/hang-then-whole"
    plant(out, WHOLE:sub(1, 6000), url, '"w"')
    local jobdir = proc.tmpdir()
    local first = proc.spawn({ "run", "http", url, "-o", out }, jobdir)
    finally(function () first:stop(); proc.rmtree(jobdir) end)
    -- the first holds the partial (its attempt has no answer)
    assert.is_truthy(proc.wait_for(function () return #srv:requests_on("/hang-then-whole") == 1 end, 10))
    local r = run({ url, "-o", out })
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("the partial download [^\n]*h.bin.luaretry%-partial is not continued: " ..
                   "another run is continuing it; the download starts from zero\n", r.stderr)
    local seen = dl.ranges(srv, "/hang-then-whole")
    assert.are.equal(2, #seen)
    assert.are.equal(false, seen[2].range)
    same_bytes(WHOLE, proc.readfile(out), "FILE")
    -- the first run's partial untouched, kept when it is cut
    first:signal("TERM")
    assert.are.equal(130, first:wait(5), first:stderr())
    kept(out, url)
  end)

  -- the partial this run continues removed meanwhile: its bytes are still
  -- the run's, checked whole, and go in place
  it("removed while a run continues it: the body still goes in place", function ()
    local out, url = tmp .. "/r.bin", srv.base .. "/hang-then-whole"
    plant(out, WHOLE:sub(1, 6000), url, '"w"')
    local jobdir = proc.tmpdir()
    -- the first attempt ends at its timeout, the second gets the rest
    local job = proc.spawn({ "run", "http", url, "-o", out, "--max-time", "3", "--set",
                             "backoff.initial=0.01" }, jobdir)
    finally(function () job:stop(); proc.rmtree(jobdir) end)
    assert.is_truthy(proc.wait_for(function () return #srv:requests_on("/hang-then-whole") == 1 end, 10))
    assert.is_true(os.remove(partial(out)))
    assert.is_true(os.remove(partial(out) .. ".url"))
    assert.are.equal(1, #srv:requests_on("/hang-then-whole"), "removed after the run went on")
    assert.are.equal(0, job:wait(10), job:stderr())
    assert.matches("attempt 2/10: 206 %-> success", job:stderr())
    same_bytes(WHOLE, proc.readfile(out), "FILE")
    assert.are.same({}, proc.leftovers(tmp))
  end)

  it("still goes on a final answer, and when the resource changed (a 200 from zero)", function ()
    local out, url = tmp .. "/e.bin", srv.base .. "/gone"
    plant(out, WHOLE:sub(1, 6000), url, '"w"')
    assert.are.equal(1, run({ url, "-o", out }).code)
    assert.is_nil(proc.readfile(partial(out)))
    assert.is_nil(proc.readfile(partial(out) .. ".url"))
    out, url = tmp .. "/f.bin", srv.base .. "/whole"
    plant(out, WHOLE:sub(1, 6000), url, '"old"')
    local r = run({ url, "-o", out })
    assert.are.equal(0, r.code, r.stderr)
    same_bytes(WHOLE, proc.readfile(out))
    assert.are.same({}, proc.leftovers(tmp))
  end)
end)

describe("--max-filesize and the bytes a file held (-C -, a partial)", function ()
  local srv, tmp
  proc.with_server(proc.root .. "/spec/fixtures/downloads/resume_trust.lua",
                   function (s, t) srv, tmp = s, t end)

  it("a policy that retries too_large resumes from where the file is, never spliced", function ()
    local policy = tmp .. "/retry_large.lua"
    proc.writefile(policy, 'name = "retry-large"\nmax_attempts = 3\ndeadline = 30\n' ..
                   'backoff = { kind = "constant", initial = 0.01, jitter = "none" }\n' ..
                   'function is_transient(status) return status == 0 or status >= 500 end\n')
    local out, url = tmp .. "/r.bin", srv.base .. "/too-large-once"
    plant(out, WHOLE:sub(1, 6000), url, '"w"')
    local r = proc.run({ "run", policy, url, "-o", out, "--max-filesize", "15000" }, { timeout = 60 })
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("attempt 1/3: too_large error %-> retry", r.stderr)
    same_bytes(WHOLE, proc.readfile(out))
    local seen = dl.ranges(srv, "/too-large-once")
    assert.are.equal(2, #seen)
    assert.are.equal("bytes=6000-", seen[2].range)
    assert.are.same({}, proc.leftovers(tmp))
  end)

  it("a 200 from zero past the limit leaves the file as it was (it emptied it)", function ()
    local out = tmp .. "/f"
    proc.writefile(out, "abc")
    local r = run({ srv.base .. "/trickle-200", "-C", "-", "-o", out, "--max-filesize", "10" })
    assert.are.equal(1, r.code, r.stderr)
    assert.matches("too_large", r.stderr)
    assert.are.equal("bytes=3-", srv:requests_on("/trickle-200")[1].headers.range)
    assert.are.equal("abc", proc.readfile(out))
    assert.are.same({}, proc.leftovers(tmp))
  end)

  it("a 206 past the limit: what it appended is taken back", function ()
    local out = tmp .. "/g"
    proc.writefile(out, "abc")
    local r = run({ srv.base .. "/trickle-206", "-C", "-", "-o", out, "--max-filesize", "10" })
    assert.are.equal(1, r.code, r.stderr)
    assert.matches("too_large", r.stderr)
    assert.are.equal("abc", proc.readfile(out))
  end)

  it("-C - --fail-with-body: bytes from zero that end in 503s never replace the file", function ()
    local out = tmp .. "/i"
    proc.writefile(out, "abc")
    local r = run({ srv.base .. "/ignores-then-busy", "-C", "-", "-o", out, "--set", "max_attempts=3",
                    "--fail-with-body" })
    assert.are.equal(4, r.code, r.stderr)
    assert.are.equal("bytes=3-", srv:requests_on("/ignores-then-busy")[1].headers.range)
    assert.are.equal("abc", proc.readfile(out))
    assert.are.same({}, proc.leftovers(tmp))
  end)

  it("-C - on a new file: error pages never go into it, so the next -C - starts from zero", function ()
    for _, path in ipairs({ "/busy", "/gone" }) do
      local out = tmp .. "/new" .. path:sub(2)
      local r = run({ srv.base .. path, "-C", "-", "-o", out, "--set", "max_attempts=2" })
      assert.is_true(r.code == 4 or r.code == 1, r.stderr)
      assert.are.equal("", proc.readfile(out))
      r = run({ srv.base .. "/whole", "-C", "-", "-o", out })
      assert.are.equal(0, r.code, r.stderr)
      same_bytes(WHOLE, proc.readfile(out))
      assert.is_nil(srv:requests_on("/whole")[1].headers.range)
      srv:reset()
    end
  end)

  it("a 200 from zero that completes replaces the file, its mode kept", function ()
    local out = tmp .. "/h"
    proc.writefile(out, "abc")
    assert.are.equal(0, proc.sh("chmod 640 " .. proc.q(out)))
    local r = run({ srv.base .. "/trickle-200", "-C", "-", "-o", out })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(("12345678"):rep(3), proc.readfile(out))
    assert.are.equal("640", proc.readfile_cmd("stat -c %a " .. proc.q(out)):match("%d+"))
    assert.are.same({}, proc.leftovers(tmp))
  end)
end)
