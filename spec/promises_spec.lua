-- Promises of README.md, luaretry(1) and `luaretry help run` that held
-- but that no spec tested (an audit): one `it` each, named for its
-- promise, which fails if the promise breaks.  Against the fault server's
-- spec/fixtures/promises/server.lua (its request log says what was sent,
-- and when each request's head came, on the server's clock).
-- Whole, the file takes about 10 s: where a promise's default is long (the
-- 30 s of -Y alone), what can be shown quickly is, and a comment says so.
local proc = require "support.proc"
local dl = require "support.downloads"
local text = require "support.text"
local lfs = require "lfs"
local q = proc.q

local FIXTURES = proc.root .. "/spec/fixtures/promises/"
local NO_STALL = FIXTURES .. "no_stall.lua"
local run = proc.run_http
local has, count = text.has, text.count

-- The program, by an absolute path (runs below change folder).
local function bin()
  local b = proc.bin
  if b:sub(1, 1) ~= "/" then b = os.getenv("PWD") .. "/" .. b end
  return b
end

-- luaretry ARGS where proc.run cannot: in folder o.dir (-O and
-- --trace-ascii % write into the current one), standard input from the
-- file o.input and standard output to the file o.stdout (a full disk:
-- /dev/full), the variables of o.unset removed and o.env ("NAME=VALUE")
-- added.  {code, stdout, stderr}.
local function run_sh(args, o)
  o = o or {}
  local words = {}
  for _, a in ipairs(args) do words[#words + 1] = q(a) end
  local env = { "env -u LD_PRELOAD" }
  for _, name in ipairs(o.unset or {}) do env[#env + 1] = "-u " .. q(name) end
  if os.getenv("ASAN_OPTIONS") then env[#env + 1] = "ASAN_OPTIONS=detect_leaks=1" end
  for _, kv in ipairs(o.env or {}) do env[#env + 1] = q(kv) end
  local out, err = os.tmpname(), os.tmpname()
  local cmd = (o.dir and "cd " .. q(o.dir) .. " && " or "") .. "timeout -s KILL 60 " .. table.concat(env, " ") ..
              " " .. q(bin()) .. " " .. table.concat(words, " ") .. " <" .. q(o.input or "/dev/null") ..
              " >" .. q(o.stdout or out) .. " 2>" .. q(err)
  local r = { code = proc.sh(cmd), stdout = proc.readfile(out), stderr = proc.readfile(err) }
  os.remove(out)
  os.remove(err)
  return r
end

-- The files under dir, as paths relative to it, sorted.
local function files_under(dir)
  local t = {}
  for line in proc.readfile_cmd("cd " .. q(dir) .. " && find . -type f | sort"):gmatch("[^\n]+") do
    t[#t + 1] = line
  end
  return t
end

-- The instants (the server's clock) at which the heads of the requests
-- on path came, in order.
local function arrivals(srv, path)
  local t = {}
  for _, r in ipairs(srv:requests_on(path)) do t[#t + 1] = r.time end
  table.sort(t)
  return t
end

-- The objects a --log-json file holds.
local function log_of(path)
  local t = {}
  for _, line in ipairs(proc.lines(proc.readfile(path) or "")) do t[#t + 1] = proc.json.decode(line) end
  return t
end

-- The /slow route's delay (fixture): each of its answers comes this long
-- after its request's head, and other connections are served meanwhile.
local SLOW = 0.3

describe("promises of the docs", function ()
  local srv, tmp
  proc.with_server(FIXTURES .. "server.lua", function (s, t) srv, tmp = s, t end)

  -- README "Downloads", luaretry(1) --checksum: "a complete answer whose
  -- server states a digest (RFC 9530 ... Content-Digest with sha-256 or
  -- sha-512) is checked before the body is kept ... retried from zero, and
  -- they are never written"
  it("a server's Content-Digest (sha-256, sha-512) is checked before -o FILE is replaced: wrong, digest_mismatch, retried from zero, never written", function ()
    local out, log = tmp .. "/d.bin", tmp .. "/log.json"
    for _, alg in ipairs({ "256", "512" }) do
      srv:reset()
      proc.writefile(out, "before\n")
      local path = "/digest" .. alg .. "-bad"
      local r = run({ srv.base .. path, "-o", out, "--retry", "2", "--log-json", log })
      assert.are.equal(4, r.code, r.stderr)
      has(r.stderr, "sha-" .. alg .. " is")
      has(r.stderr, "content-digest says")
      local errors = {}
      for _, o in ipairs(log_of(log)) do
        if not o.summary then errors[#errors + 1] = o.error end
      end
      assert.are.same({ "digest_mismatch", "digest_mismatch", "digest_mismatch" }, errors)
      -- from zero, though the answer offered ranges and a strong ETag
      assert.are.same({ { range = false, if_range = false }, { range = false, if_range = false },
                        { range = false, if_range = false } }, dl.ranges(srv, path))
      assert.are.equal("before\n", proc.readfile(out))
      assert.are.same({}, proc.leftovers(tmp))
      -- a right one: kept
      r = run({ srv.base .. "/digest" .. alg .. "-ok", "-o", out })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(dl.content(100), proc.readfile(out))
      assert.is_nil(r.stderr:find("mismatch", 1, true))
      os.remove(log)
    end
  end)

  -- luaretry(1) -J: "its last path segment only, never a hidden one"
  it("-J writes the Content-Disposition name's last path segment only, never a hidden one", function ()
    local dir = tmp .. "/a/b"
    assert.are.equal(0, proc.sh("mkdir -p " .. q(dir)))
    local r = run_sh({ "run", "-s", "-O", "-J", srv.base .. "/j/plain.txt?../../x/evil.txt" }, { dir = dir })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.same({ "./a/b/evil.txt" }, files_under(tmp))
    assert.are.equal("from j\n", proc.readfile(dir .. "/evil.txt"))
    -- a hidden name: the URL's is kept
    r = run_sh({ "run", "-s", "-O", "-J", srv.base .. "/j/plain.txt?.bashrc" }, { dir = dir })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.same({ "./a/b/evil.txt", "./a/b/plain.txt" }, files_under(tmp))
  end)

  -- luaretry(1) -Z: "A batch's transfers at once, as curl's (50 at most)".
  -- Measured on the server's clock, with no race: of any 51 requests, with
  -- at most 50 in flight at once, one was sent after another's answer had
  -- come, and the server answers SLOW s after a request's head at the
  -- soonest; so in order of arrival, request i + 50 comes SLOW s after
  -- request i at least (60 at once: all within a few ms).
  it("-Z runs at most 50 transfers at once (60 URLs to a slow route)", function ()
    local args = { "-s", "-Z", "--set", "rate=none", "--output-dir", tmp }
    for i = 1, 60 do args[#args + 1] = srv.base .. "/slow?" .. i end
    local r = run(args)
    assert.are.equal(0, r.code, r.stderr)
    local t = arrivals(srv, "/slow")
    assert.are.equal(60, #t)
    for i = 1, #t - 50 do
      assert.is_true(t[i + 50] >= t[i] + SLOW - 0.05,
                     ("request %d came %.3f s after request %d: more than 50 at once"):format(i + 50, t[i + 50] - t[i], i))
    end
  end)

  -- help run: -m and --retry-max-time "(0: none, for both)": 0 turns the
  -- policy's limit off (a 0.1 s one, set before, would cut the slow answer)
  it("-m 0 and --retry-max-time 0 mean none: no attempt timeout, no deadline", function ()
    for _, case in ipairs({ { "attempt_timeout=0.1", "-m" }, { "deadline=0.1", "--retry-max-time" } }) do
      local cut = run({ srv.base .. "/slow", "--retry", "0", "--set", case[1] })
      assert.are_not.equal(0, cut.code, case[1])
      assert.are.equal("", cut.stdout)
      local r = run({ srv.base .. "/slow", "--retry", "0", "--set", case[1], case[2], "0" })
      assert.are.equal(0, r.code, case[2] .. ": " .. r.stderr)
      assert.are.equal("slow\n", r.stdout)
    end
  end)

  -- luaretry(1) -L: "at most --max-redirs n (default 50)"; help run:
  -- "--max-redirs N ... (default 50, as curl; -1: no limit)"
  it("-L follows at most 50 redirects by default (a loop: 'Maximum (50) redirects followed'); --max-redirs -1 has no limit", function ()
    local r = run({ "-L", srv.base .. "/loop" })
    assert.are.equal(1, r.code, r.stderr)
    has(r.stderr, "too_many_redirects error -> final")
    has(r.stderr, "Maximum (50) redirects followed")
    assert.are.equal(51, #srv:requests_on("/loop")) -- the first request and 50 redirects, one attempt
    -- exactly 50: 50 hops arrive, 51 do not
    r = run({ "-s", "-L", srv.base .. "/hops?50", "-w", "|%{num_redirects}" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("arrived\n|50", r.stdout)
    r = run({ "-L", srv.base .. "/hops?51" })
    assert.are.equal(1, r.code, r.stderr)
    has(r.stderr, "Maximum (50) redirects followed")
    -- -1: 60 hops
    r = run({ "-s", "-L", "--max-redirs", "-1", srv.base .. "/hops?60", "-w", "|%{num_redirects}" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("arrived\n|60", r.stdout)
  end)

  -- help run: "-Y, --speed-limit BYTES  with -y: ... (default 1)" and
  -- "-y ... (-Y alone: the policy's, or 30 s)".  With a policy that sets
  -- neither: -y 1 alone stalls at 1 byte/s, on a server that sends
  -- nothing after the head.  -Y alone takes the policy's stall_timeout.
  -- Its 30 s where the policy has none is not waited for here: nothing
  -- (--log-json, check) shows the time before it has run out.
  it("-y alone stalls below 1 byte/s (-Y's default); -Y alone takes the policy's stall_timeout", function ()
    local log = tmp .. "/log.json"
    local r = proc.run({ "run", NO_STALL, srv.base .. "/silent", "-y", "1", "--log-json", log }, { timeout = 60 })
    assert.are.equal(4, r.code, r.stderr)
    local first = log_of(log)[1]
    assert.are.equal("stalled", first.error)
    assert.are.equal("Operation too slow. Less than 1 bytes/sec transferred the last 1 seconds", first.error_detail)
    os.remove(log)
    r = proc.run({ "run", NO_STALL, srv.base .. "/silent", "--set", "stall_timeout=1", "-Y", "100",
                   "--log-json", log }, { timeout = 60 })
    assert.are.equal(4, r.code, r.stderr)
    first = log_of(log)[1]
    assert.are.equal("stalled", first.error)
    assert.are.equal("Operation too slow. Less than 100 bytes/sec transferred the last 1 seconds", first.error_detail)
  end)

  -- luaretry(1) ENVIRONMENT and FILES: the local store is under
  -- /tmp/luaretry-UID (made 0700) when XDG_RUNTIME_DIR is not an absolute
  -- path (or unset), or with fleet.local=on, which does not read it.  A key
  -- of this test's own; its store is removed after (and the folder, when
  -- this test made it and it is empty).
  it("the local store is under /tmp/luaretry-UID when XDG_RUNTIME_DIR is unset or relative, or with fleet.local=on", function ()
    local uid = proc.readfile_cmd("id -u"):match("%d+")
    local shared = "/tmp/luaretry-" .. uid
    local made = lfs.attributes(shared, "mode") == nil
    local run_dir = tmp .. "/run"
    assert.are.equal(0, proc.sh("mkdir -m 700 " .. q(run_dir)))
    local key = ("promises-%d-%d"):format(math.floor(proc.now() * 1000) % 1000000, math.random(1e6))
    local stores = {}
    local ok, err = pcall(function ()
      local function store(o, ...)
        local r = run_sh({ "fleet", "gcs", "--fleet", "local", "--set", "fleet.key=" .. key, ... }, o)
        assert.are.equal(0, r.code, r.stderr)
        local file = r.stdout:match(" at (%S+)\n")
        stores[#stores + 1] = file
        return file:match("^(.*)/luaretry%-fleet%-%x+%-%x+$")
      end
      assert.are.equal(shared, store({ unset = { "XDG_RUNTIME_DIR" } }))
      assert.are.equal(shared, store({ env = { "XDG_RUNTIME_DIR=rel" } }))
      assert.are.equal(shared, store({ env = { "XDG_RUNTIME_DIR=" .. run_dir } }, "--set", "fleet.local=on"))
      assert.are.equal("700", proc.readfile_cmd("stat -c %a " .. q(shared)):match("%d+"))
      -- an absolute one, without fleet.local=on: there
      assert.are.equal(run_dir, store({ env = { "XDG_RUNTIME_DIR=" .. run_dir } }))
    end)
    for _, file in ipairs(stores) do
      if file:find(shared .. "/", 1, true) == 1 then os.remove(file) end
    end
    if made then lfs.rmdir(shared) end
    assert(ok, err)
  end)

  -- luaretry(1) --retry-on-exit: "where a --set wrote either list, the
  -- retried list wins"
  it("--retry-on-exit and --final-on-exit beside a --set of the other list: the retried list wins", function ()
    local function cmd(...)
      return proc.run(proc.concat({ "run", "--retry", "1" }, { ... }, proc.FAST, { "--", "sh", "-c", "exit 3" }),
                      { timeout = 60 })
    end
    -- the option's final list alone: final at once
    local r = cmd("--final-on-exit", "3")
    assert.are.equal(1, r.code, r.stderr)
    has(r.stderr, "attempt 1/2: exit 3 -> final")
    for _, args in ipairs({ { "--set", "options.retry_exit_codes=3", "--final-on-exit", "3" },
                            { "--retry-on-exit", "3", "--set", "options.final_exit_codes=3" } }) do
      r = cmd(table.unpack(args))
      assert.are.equal(4, r.code, table.concat(args, " ") .. ": " .. r.stderr)
      has(r.stderr, "attempt 1/2: exit 3 -> retry")
      has(r.stderr, "attempt 2/2: exit 3 -> exhausted")
    end
  end)

  -- luaretry(1) -e: "';auto' also sets it on redirects" (as curl's: the
  -- URL redirected from); without it, the given one stays
  it("-e URL;auto sets the Referer on redirects too", function ()
    local function referers()
      local t = {}
      for _, s in ipairs(srv:requests_on("/hops")) do t[#t + 1] = s.headers.referer or false end
      srv:reset()
      return t
    end
    local start = srv.base .. "/hops?2"
    local r = run({ "-s", "-L", "-e", "http://ref.example/;auto", start })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.same({ "http://ref.example/", start, srv.base .. "/hops?1" }, referers())
    r = run({ "-s", "-L", "-e", ";auto", start })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.same({ false, start, srv.base .. "/hops?1" }, referers())
    r = run({ "-s", "-L", "-e", "http://ref.example/", start })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.same({ "http://ref.example/", "http://ref.example/", "http://ref.example/" }, referers())
  end)

  -- luaretry(1) -K: "'-' reads standard input"; --url: "A URL, as a word
  -- would be: curl's spelling, for -K files"
  it("-K - reads its options from standard input; --url is a URL as a word is", function ()
    local input = tmp .. "/config"
    proc.writefile(input, ('url = "%s/from-k"\nheader = "X-K: 1"\n'):format(srv.base))
    local r = run_sh({ "run", "-s", "-K", "-" }, { input = input })
    assert.are.equal(0, r.code, r.stderr)
    local seen = srv:requests_on("/from-k")
    assert.are.equal(1, #seen)
    assert.are.equal("1", seen[1].headers["x-k"])
    r = run({ "-s", "--url", srv.base .. "/by-url" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(1, #srv:requests_on("/by-url"))
  end)

  -- help run: "-C, --continue-at -  continue the -o (or -O) file ..., one URL"
  it("-C - with two URLs is a usage error ('-C - takes one URL'), nothing sent", function ()
    local r = run_sh({ "run", "-C", "-", "-O", srv.base .. "/a", srv.base .. "/b" }, { dir = tmp })
    assert.are.equal(2, r.code, r.stderr)
    assert.matches("^luaretry: run: %-C %- takes one URL\n", r.stderr)
    assert.are.same({}, srv:requests())
    assert.are.same({}, files_under(tmp))
  end)

  -- luaretry(1) --metrics-file: "a file that cannot be written is said,
  -- and the exit status stays the call's"; -s: it is said even so, the
  -- status being unable to tell
  it("--metrics-file that cannot be written: said (under -s too), the exit status the call's", function ()
    local missing = tmp .. "/no/such/dir/m.prom"
    for _, case in ipairs({ { "/echo", 0 }, { "/gone", 1 } }) do
      for _, silent in ipairs({ {}, { "-s" } }) do
        local r = run(proc.concat(silent, { srv.base .. case[1], "--metrics-file", missing }))
        assert.are.equal(case[2], r.code, case[1] .. ": " .. r.stderr)
        assert.matches("luaretry: %-%-metrics%-file " .. missing:gsub("%p", "%%%0") .. ": [^\n]*No such file or directory\n",
                       r.stderr)
      end
    end
    local r = run({ "-s", srv.base .. "/echo", "--metrics-file", "/dev/full" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("luaretry: --metrics-file /dev/full: writing: No space left on device\n", r.stderr)
    assert.is_nil(proc.readfile(tmp .. "/no"))
  end)

  -- luaretry(1) -s: "Still said: a usage error, a write error (of the body
  -- or a command's output, -D or -c), and a --log-json or --metrics-file
  -- file that cannot be written" (--metrics-file: above)
  it("-s still says a usage error, a write error, and a --log-json that cannot be written", function ()
    local function said(args, code, what, stdout)
      local r = run_sh(args, { stdout = stdout })
      assert.are.equal(code, r.code, table.concat(args, " ") .. ": " .. r.stderr)
      has(r.stderr, what)
    end
    local url = srv.base .. "/echo"
    said({ "run", "-s", "--retry", "x", url }, 2, "--retry x")
    said({ "run", "-s", "-d", "body", url, "-o", "/dev/full" }, 1, "-o /dev/full: writing: No space left on device")
    said({ "run", "-s", "--", "echo", "out" }, 1, "standard output: writing: No space left on device", "/dev/full")
    said({ "run", "-s", url, "-D", "/dev/full" }, 1, "-D /dev/full: No space left on device")
    said({ "run", "-s", url, "-c", "/dev/full" }, 1, "-c /dev/full: writing: No space left on device")
    said({ "run", "-s", url, "--log-json", "/dev/full" }, 0, "--log-json /dev/full: lines not written")
  end)

  -- luaretry(1) check: a workflow's run() "that keeps asking ... is
  -- stopped after 64 requests, which is no problem"
  it("check stops a workflow's run() after exactly 64 requests, no problem", function ()
    local function check_raising_at(n)
      local policy = tmp .. "/poll" .. n .. ".lua"
      proc.writefile(policy, ("max_attempts = 1\ndeadline = 5\n" ..
                              "function run(http, args)\n" ..
                              "  for i = 1, 1000 do\n" ..
                              "    if i == %d then error(\"raised before request \" .. i) end\n" ..
                              "    http.get(args[1])\n" ..
                              "  end\n" ..
                              "  return 200, \"done\\n\"\n" ..
                              "end\n"):format(n))
      return proc.run({ "check", policy }, { timeout = 60 })
    end
    -- 64 requests answered: a raise before the 65th is the script's error
    local r = check_raising_at(65)
    assert.are.equal(3, r.code, r.stdout .. r.stderr)
    has(r.stdout, "error: run: " .. tmp .. "/poll65.lua:5: raised before request 65")
    -- the 65th is where check stops it: it never reaches the raise
    r = check_raising_at(66)
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    has(r.stdout, tmp .. "/poll66.lua: ok")
  end)

  -- help simulate: --outage "(default 30)", --status "(default 503)",
  -- --seed "(default 1)", --calls "(default 1000)"
  it("simulate's defaults: --outage 30, --status 503, --seed 1, --calls 1000", function ()
    local function sim(...) return proc.run({ "simulate", "http", ... }, { timeout = 60 }) end
    local plain = sim("--clients", "200")
    assert.are.equal(0, plain.code, plain.stderr)
    assert.are.equal(plain.stdout, sim("--clients", "200", "--outage", "30", "--status", "503", "--seed", "1").stdout)
    -- (each changes the output: the comparison is not idle)
    for _, other in ipairs({ { "--outage", "29" }, { "--status", "429" }, { "--seed", "2" } }) do
      assert.are_not.equal(plain.stdout, sim("--clients", "200", table.unpack(other)).stdout, other[1])
    end
    local lat = sim("--latency", "0.01,1@0.05")
    assert.are.equal(0, lat.code, lat.stderr)
    assert.are.equal(lat.stdout, sim("--latency", "0.01,1@0.05", "--calls", "1000", "--seed", "1").stdout)
    assert.are_not.equal(lat.stdout, sim("--latency", "0.01,1@0.05", "--calls", "999").stdout)
  end)

  -- luaretry(1) simulate --clients: "At most 1000000."
  it("simulate --clients takes 1000000 and refuses 1000001, naming the range", function ()
    local r = proc.run({ "simulate", "http", "--clients", "1000001" }, { timeout = 60 })
    assert.are.equal(2, r.code, r.stderr)
    assert.matches("^luaretry: %-%-clients 1000001: expected a whole number from 1 to 1000000\n", r.stderr)
    -- (one attempt each, the cheapest herd of that size)
    r = proc.run({ "simulate", "http", "--clients", "1000000", "--outage", "1", "--set", "max_attempts=1" },
                 { timeout = 60 })
    assert.are.equal(0, r.code, r.stderr)
    has(r.stdout, "1000000 clients fail together")
  end)

  -- luaretry(1) --checksum: "alg is sha-256, sha-512 or md5"
  it("--checksum sha-512: a right digest is kept (exit 0), a wrong one is checksum_mismatch (exit 1)", function ()
    proc.writefile(tmp .. "/expected", dl.content(100))
    local sum = proc.readfile_cmd("sha512sum " .. q(tmp .. "/expected")):match("^(%x+)")
    assert.are.equal(128, #sum)
    local out = tmp .. "/sum.bin"
    local r = run({ srv.base .. "/file100", "-o", out, "--checksum", "sha-512=" .. sum })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(dl.content(100), proc.readfile(out))
    os.remove(out)
    local wrong = (sum:sub(1, 1) == "0" and "1" or "0") .. sum:sub(2)
    r = run({ srv.base .. "/file100", "-o", out, "--checksum", "sha-512=" .. wrong })
    assert.are.equal(1, r.code, r.stderr)
    has(r.stderr, "checksum_mismatch error -> final")
    assert.is_nil(proc.readfile(out))
  end)

  -- help run -w: %{num_redirects} and %{content_type}, as curl's
  it("-w %{num_redirects} and %{content_type} are curl's", function ()
    local format = "%{num_redirects}|%{content_type}\\n"
    local cases = {
      { srv.base .. "/hops?3", { "-L" }, "3|\n" },
      { srv.base .. "/to?%2Fecho", { "-L" }, "1|text/x-echo; charset=utf-8\n" },
      { srv.base .. "/to?%2Fecho", {}, "0|\n" },
    }
    local has_curl = proc.sh("command -v curl >/dev/null 2>&1") == 0
    for _, case in ipairs(cases) do
      local r = run(proc.concat({ "-s", case[1], "-o", "/dev/null", "-w", format }, case[2]))
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(case[3], r.stdout, case[1])
      if has_curl then
        local curls = proc.readfile_cmd(proc.CURL .. table.concat(case[2], " ") .. " -o /dev/null -w " ..
                                        q(format) .. " " .. q(case[1]))
        assert.are.equal(curls, r.stdout, "curl: " .. case[1])
      end
    end
  end)

  -- luaretry(1) --trace-ascii: "'%' for standard error"
  it("--trace-ascii % writes the trace to standard error, no file named %", function ()
    local r = run_sh({ "run", "-s", "--trace-ascii", "%", "-d", "hello", srv.base .. "/echo" }, { dir = tmp })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("hello", r.stdout)
    assert.matches("=> Send header, %d+ bytes", r.stderr)
    has(r.stderr, "POST /echo HTTP/1.1")
    assert.are.same({}, files_under(tmp))
  end)

  -- nothing lost without a word: a trace that cannot be written is said,
  -- under -s too, and the exit status stays the call's (as --log-json's)
  it("--trace-ascii to a full disk: said at the end, the exit status the call's", function ()
    local r = run_sh({ "run", "-s", "--trace-ascii", "/dev/full", "-d", "hello", srv.base .. "/echo" },
                     { dir = tmp })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("hello", r.stdout)
    assert.are.equal("luaretry: --trace-ascii /dev/full: writing: No space left on device\n", r.stderr)
  end)

  -- luaretry(1) --resolve: "host '*' for any"
  it("--resolve '*:PORT:127.0.0.1' connects there for any host", function ()
    local r = run({ "-s", "--resolve", "*:" .. srv.port .. ":127.0.0.1",
                    "http://nonexistent.invalid:" .. srv.port .. "/anyhost" })
    assert.are.equal(0, r.code, r.stderr)
    local seen = srv:requests_on("/anyhost")
    assert.are.equal(1, #seen)
    assert.are.equal("nonexistent.invalid:" .. srv.port, seen[1].headers.host)
  end)

  -- luaretry(1) --limit-rate and --max-filesize: "the suffixes are 1024s".
  -- --max-filesize against a 100000-byte body: 97k is 99328 (too small),
  -- 98k 100352.  --limit-rate's pace is not timed here (a race against the
  -- machine's load): its value must be a byte or more, and 1/1024 k is one.
  it("--max-filesize and --limit-rate take k as 1024", function ()
    local out = tmp .. "/k.bin"
    local r = run({ srv.base .. "/file100k", "--max-filesize", "97k", "-o", out })
    assert.are.equal(1, r.code, r.stderr)
    has(r.stderr, "too_large error -> final")
    assert.is_nil(proc.readfile(out))
    r = run({ "-s", srv.base .. "/file100k", "--max-filesize", "98k", "-o", out })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(100000, #proc.readfile(out))
    -- 0.000977k is 1.0004 bytes a second (0.977 with 1000s: refused), 0.000976k 0.9994
    r = run({ "-s", "--limit-rate", "0.000977k", srv.base .. "/echo" })
    assert.are.equal(0, r.code, r.stderr)
    r = run({ "-s", "--limit-rate", "0.000976k", srv.base .. "/echo" })
    assert.are.equal(2, r.code, r.stderr)
    has(r.stderr, "--limit-rate 0.000976k: expected bytes above 0 (a k, m or g suffix: 1024s)")
  end)

  -- luaretry(1) -d: "several are joined with &; a file is sent as it is";
  -- "--data-ascii is the same"
  it("--data-ascii is -d: @FILE as it is, several joined with &", function ()
    local f = tmp .. "/body.txt"
    proc.writefile(f, "line1\r\nline2\n")
    local a = run({ "-s", "--data-ascii", "@" .. f, "--data-ascii", "x=1", srv.base .. "/ascii" })
    local d = run({ "-s", "-d", "@" .. f, "-d", "x=1", srv.base .. "/data" })
    assert.are.equal(0, a.code, a.stderr)
    assert.are.equal(0, d.code, d.stderr)
    assert.are.equal("line1\r\nline2\n&x=1", a.stdout)
    assert.are.equal(d.stdout, a.stdout)
    local sa, sd = srv:requests_on("/ascii")[1], srv:requests_on("/data")[1]
    assert.are.equal("POST", sa.method)
    assert.are.equal(sd.body_hash, sa.body_hash)
    assert.are.equal(sd.headers["content-type"], sa.headers["content-type"])
  end)

  -- help run: "--parallel-max N  at most N at once (1 to 1000; default 1),
  -- without -Z too".  Measured as -Z's bound is: with one at a time, each
  -- request comes after the one before was answered, SLOW s after its
  -- head at the soonest.
  it("a batch without -Z or --parallel-max runs one transfer at a time", function ()
    local r = run({ "-s", "--set", "rate=none", "--output-dir", tmp,
                    srv.base .. "/slow?1", srv.base .. "/slow?2", srv.base .. "/slow?3" })
    assert.are.equal(0, r.code, r.stderr)
    local t = arrivals(srv, "/slow")
    assert.are.equal(3, #t)
    for i = 1, 2 do
      assert.is_true(t[i + 1] >= t[i] + SLOW - 0.05,
                     ("request %d came %.3f s after request %d: two at once"):format(i + 1, t[i + 1] - t[i], i))
    end
  end)

  -- luaretry(1) ENVIRONMENT: "http_proxy, https_proxy, no_proxy" are
  -- libcurl's.  The proxy is a second fault server, whose log says what
  -- went through it.
  it("no_proxy is read: a host it names is asked directly, not through http_proxy", function ()
    local proxy = proc.server(FIXTURES .. "server.lua")
    local ok, err = pcall(function ()
      local through = { "http_proxy=" .. proxy.base, "no_proxy=", "NO_PROXY=" }
      local r = run({ "-s", srv.base .. "/via" }, { env = through })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(1, #proxy:requests_on("/via"))
      assert.are.equal(0, #srv:requests_on("/via"))
      r = run({ "-s", srv.base .. "/direct" }, { env = { "http_proxy=" .. proxy.base, "no_proxy=127.0.0.1" } })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(1, #srv:requests_on("/direct"))
      assert.are.equal(0, #proxy:requests_on("/direct"))
    end)
    proxy:stop()
    assert(ok, err)
  end)
end)
