-- The curl options scripts use with --retry: -O, --remote-name-all, -T,
-- -F, -G, -b/-c, --resolve, -x, -K, -Z/--parallel-max, each against the
-- fault server's echo (spec/fixtures/curl_more/echo.lua) and its request log.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
package.path = here .. "/?.lua;" .. package.path
local proc = require "support.proc"
local q = proc.q

local run = proc.run_http

-- luaretry run in directory dir (for -O, which writes into the current one).
local function run_in(dir, args)
  local words = {}
  for _, v in ipairs(args) do words[#words + 1] = q(v) end
  local bin = proc.bin
  if bin:sub(1, 1) ~= "/" then bin = os.getenv("PWD") .. "/" .. bin end
  return proc.sh("cd " .. q(dir) .. " && " .. q(bin) .. " run http -s " .. table.concat(words, " ") ..
                 " </dev/null >/dev/null 2>&1")
end

describe("curl's retried options", function ()
  local srv, tmp
  proc.with_server(here .. "/fixtures/curl_more/echo.lua", function (s, t) srv, tmp = s, t end)
  before_each(function () proc.writefile(tmp .. "/up.txt", "the upload\n") end)

  it("-T FILE: a PUT of the file, sent whole on every attempt; a URL ending in / gets its name", function ()
    local r = run({ "-T", tmp .. "/up.txt", srv.base .. "/once503" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("the upload\n", r.stdout)
    local seen = srv:requests_on("/once503")
    assert.are.equal(2, #seen)
    for _, s in ipairs(seen) do
      assert.are.equal("PUT", s.method)
      assert.are.equal(11, s.body_len)
      assert.is_nil(s.headers["content-type"])
    end
    r = run({ "--upload-file", tmp .. "/up.txt", srv.base .. "/dir/" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(1, #srv:requests_on("/dir/up.txt"))
  end)

  -- luaretry(1) -T: "the headers curl -T sends: no Content-Type"; a user
  -- who swaps curl for luaretry sends the same request
  it("-T sends no Content-Type, as curl -T; one given with -H goes as given", function ()
    local r = run({ "-T", tmp .. "/up.txt", srv.base .. "/plain" })
    assert.are.equal(0, r.code, r.stderr)
    local seen = srv:requests_on("/plain")
    assert.are.equal(1, #seen)
    assert.is_nil(seen[1].headers["content-type"])
    r = run({ "-T", tmp .. "/up.txt", "-H", "Content-Type: text/csv", srv.base .. "/typed" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("text/csv", srv:requests_on("/typed")[1].headers["content-type"])
    if proc.sh("command -v curl >/dev/null 2>&1") == 0 then
      proc.readfile_cmd(proc.CURL .. "-o /dev/null -T " .. q(tmp .. "/up.txt") .. " " ..
                        q(srv.base .. "/bycurl"))
      local curls = srv:requests_on("/bycurl")
      assert.are.equal(1, #curls)
      assert.are.equal("PUT", curls[1].method)
      assert.is_nil(curls[1].headers["content-type"])
    end
  end)

  -- `args` to a URL of `path`: a usage error whose message matches
  -- `pattern`, and nothing sent there
  local function refused_unsent(args, pattern, path)
    args[#args + 1] = srv.base .. path
    local r = run(args)
    assert.are.equal(2, r.code, r.stderr)
    assert.matches(pattern, r.stderr)
    assert.are.equal(0, #srv:requests_on(path))
  end

  -- a body's file that cannot be read: a usage error before anything is
  -- sent, naming the option and the value as the user typed them
  it("a body file that cannot be read is named by the option typed: -T, --upload-file, --data-binary, -d", function ()
    for _, case in ipairs {
      { { "-T", tmp .. "/none" }, "-T " .. tmp .. "/none: No such file or directory" },
      { { "--upload-file", tmp }, "--upload-file " .. tmp .. ": Is a directory" },
      { { "--data-binary", "@" .. tmp .. "/none" }, "--data-binary @" .. tmp .. "/none: No such file" },
      { { "-d", "@" .. tmp .. "/none" }, "-d @" .. tmp .. "/none: No such file" },
      { { "-T", "" }, "-T '': expected a file" },
    } do
      refused_unsent(case[1], "^luaretry: [^\n]*" .. case[2]:gsub("%p", "%%%0"), "/unread")
    end
  end)

  -- -D's file is checked before the request goes, as -o's is (a POST
  -- would have taken effect): a usage error naming it, nothing sent
  it("-o '', -o twice, -D '', or a -D file that cannot be written: usage errors before anything is sent", function ()
    for _, case in ipairs {
      { { "-o", "" }, "run: -o '': expected a file" },
      { { "-o", tmp .. "/a", "--output", tmp .. "/b" }, "run: --output given twice" },
      { { "-D", "" }, "run: -D '': expected a file" },
      { { "--dump-header", "" }, "run: --dump-header '': expected a file" },
      { { "-D", tmp .. "/no/such/dir/h" },
        "run: -D " .. tmp .. "/no/such/dir/h: its folder " .. tmp .. "/no/such/dir: No such file or directory" },
      { { "-D", tmp }, "run: -D " .. tmp .. ": Is a directory" },
      -- a folder no file can be made in, whoever runs it (root's access()
      -- said yes to /proc, and the POST went)
      { { "-D", "/proc/h.txt" }, "run: -D /proc/h.txt: its folder /proc: cannot create files there" },
    } do
      local args = case[1]
      args[#args + 1] = "-X"
      args[#args + 1] = "POST"
      refused_unsent(args, "^luaretry: " .. case[2]:gsub("%p", "%%%0"), "/unsent")
    end
    -- a -D file that can be: the final response's headers
    local r = run({ "-D", tmp .. "/h.txt", srv.base .. "/once503" })
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("^HTTP/1%.1 200", proc.readfile(tmp .. "/h.txt"))
  end)

  -- the log and the trace are opened at the start: they emptied the body's
  -- file before it was read, and an empty body went
  it("-d @FILE or -T FILE that --log-json or --trace-ascii names too: a usage error, the file intact", function ()
    local f = tmp .. "/body.txt"
    for _, case in ipairs {
      { { "-d", "@" .. f, "--log-json", f }, "-d and --log-json" },
      { { "--data-binary", "@" .. f, "--trace-ascii", tmp .. "/./body.txt" }, "--data-binary and --trace-ascii" },
      { { "-T", f, "--log-json", f }, "-T and --log-json" },
    } do
      proc.writefile(f, "precious\n")
      refused_unsent(case[1], ("run: " .. case[2] .. " name the same file"):gsub("%p", "%%%0"), "/body")
      assert.are.equal("precious\n", proc.readfile(f))
    end
  end)

  -- two of the files written at the end naming one file: the later wrote
  -- over the earlier (-o X -D X kept the headers, lost the body)
  it("-o, -D, --log-json, --metrics-file, --trace-ascii or -c naming one file: a usage error, nothing sent", function ()
    local f = tmp .. "/same"
    for _, case in ipairs {
      { { "-o", f, "-D", f }, "-o and -D" },
      { { "-o", f, "--log-json", tmp .. "/./same" }, "-o and --log-json" },
      { { "-D", f, "--metrics-file", f }, "-D and --metrics-file" },
      { { "--log-json", f, "--trace-ascii", f }, "--log-json and --trace-ascii" },
      { { "-o", f, "-c", f }, "-o and -c" },
    } do
      refused_unsent(case[1], ("run: " .. case[2] .. " name the same file"):gsub("%p", "%%%0"), "/twice")
    end
    assert.is_nil(proc.readfile(f))
    -- -b reads what -c writes: curl's cookie jar, not a clash
    local r = run({ "-b", f, "-c", f, "-o", tmp .. "/other", srv.base .. "/twice" })
    assert.are.equal(0, r.code, r.stderr)
  end)

  -- -L follows http and https only: a redirect elsewhere is the same on
  -- every attempt, final (curl's --retry does not retry it either)
  it("-L: a redirect to another scheme fails once as redirect_refused, final, for every shipped HTTP policy", function ()
    for _, target in ipairs { "ftp://127.0.0.1/x", "file:///etc/passwd" } do
      srv:reset()
      local r = run({ "-L", "--log-json", tmp .. "/log", srv.base .. "/to?" .. target })
      assert.are.equal(1, r.code, r.stderr)
      assert.are.equal(1, #srv:requests_on("/to"))
      assert.matches('"error":"redirect_refused"', proc.readfile(tmp .. "/log"), 1, true)
    end
    for _, policy in ipairs { "http", "gcs", "iam", "memorystore", "azure", "azure-batch",
                              "azure-interactive" } do
      local x = proc.run({ "check", policy, "--probe", "0 redirect_refused" })
      assert.are.equal(0, x.code, policy .. ": " .. x.stderr)
      assert.matches("0 redirect_refused%s+final", x.stdout, nil, false)
    end
  end)

  -- -D - as -D FILE: the final response's headers only (a 503 retried
  -- wrote its block to standard output, which cannot be taken back)
  it("-D - writes the final response's headers once, before the body, as -D FILE does", function ()
    local function blocks(text)
      local n = 0
      for _ in text:gmatch("HTTP/1%.1 %d%d%d") do n = n + 1 end
      return n
    end
    srv:reset()
    local r = run({ "-D", "-", "-o", tmp .. "/body", srv.base .. "/once503" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(2, #srv:requests_on("/once503"))
    assert.are.equal(1, blocks(r.stdout), r.stdout)
    assert.matches("^HTTP/1%.1 200", r.stdout)
    srv:reset()
    r = run({ "-D", tmp .. "/h.txt", "-o", tmp .. "/body", srv.base .. "/once503" })
    assert.are.equal(0, r.code, r.stderr)
    local file = proc.readfile(tmp .. "/h.txt")
    assert.are.equal(1, blocks(file))
    assert.are.equal(file:match("^[^\r\n]*"), (run({ "-D", "-", "-o", tmp .. "/b2", srv.base .. "/once503" })
                                                  .stdout:match("^[^\r\n]*")))
    -- the body on standard output too: the headers first, then the body, once
    srv:reset()
    r = run({ "-D", "-", srv.base .. "/once503" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(1, blocks(r.stdout), r.stdout)
    local head_end = r.stdout:find("\r\n\r\n", 1, true)
    assert.is_truthy(head_end, r.stdout)
    assert.matches("^HTTP/1%.1 200", r.stdout)
  end)

  it("-F/--form: multipart (text, @FILE, <FILE), the same body on every attempt; a POST alone", function ()
    local r0 = run({ "-F", "a=b", srv.base .. "/post" })
    assert.are.equal(0, r0.code, r0.stderr)
    assert.are.equal("POST", srv:requests_on("/post")[1].method)
    -- a POST is not retried by the http policy: the multipart PUT is
    local r = run({ "-X", "PUT", "-F", "name=value", "-F", "file=@" .. tmp .. "/up.txt;type=text/plain",
                    "--form", "text=<" .. tmp .. "/up.txt", "--form-string", "raw=@not-a-file",
                    srv.base .. "/once503" })
    assert.are.equal(0, r.code, r.stderr)
    local seen = srv:requests_on("/once503")
    assert.are.equal(2, #seen)
    assert.are.equal("PUT", seen[1].method)
    assert.are.equal(seen[1].body_hash, seen[2].body_hash)
    local boundary = seen[1].headers["content-type"]:match("^multipart/form%-data; boundary=(.+)$")
    assert.is_truthy(boundary)
    local body = r.stdout
    assert.is_truthy(body:find('name="name"\r\n\r\nvalue\r\n', 1, true))
    assert.is_truthy(body:find('name="file"; filename="up.txt"\r\nContent-Type: text/plain\r\n\r\nthe upload\n\r\n', 1, true))
    assert.is_truthy(body:find('name="text"\r\n\r\nthe upload\n\r\n', 1, true))
    assert.is_truthy(body:find('name="raw"\r\n\r\n@not-a-file\r\n', 1, true))
    assert.is_truthy(body:find("--" .. boundary .. "--\r\n", 1, true))
  end)

  it("-F: a name or file name with '\"', CR or LF is escaped as curl does (%22, %0D, %0A): no header injected", function ()
    local evil = tmp .. '/q"x\r\nX-Inj: 1.txt'
    proc.writefile(evil, "payload")
    local r = run({ "-X", "PUT", "-F", 'n"a\r\nX-Name: 2=v', "-F", "up=@" .. evil, srv.base .. "/form" })
    os.remove(evil)
    assert.are.equal(0, r.code, r.stderr)
    local body = r.stdout
    assert.is_truthy(body:find('name="n%22a%0D%0AX-Name: 2"\r\n\r\nv\r\n', 1, true), body)
    assert.is_truthy(body:find('name="up"; filename="q%22x%0D%0AX-Inj: 1.txt"\r\n', 1, true), body)
    assert.is_falsy(body:find("\nX-Inj", 1, true))
    assert.is_falsy(body:find("\nX-Name", 1, true))
  end)

  it("-G/--get: -d's data in the query of a GET", function ()
    local r = run({ "-G", "-d", "a=1", "-d", "b=two", srv.base .. "/q?x=0" })
    assert.are.equal(0, r.code, r.stderr)
    local s = srv:requests_on("/q")[1]
    assert.are.equal("GET", s.method)
    assert.are.equal("x=0&a=1&b=two", s.query)
    assert.are.equal(0, s.body_len)
  end)

  it("-O/--remote-name: the URL's name in the current folder, or --output-dir; --remote-name-all", function ()
    local dir = tmp .. "/o"
    proc.sh("mkdir -p " .. q(dir .. "/sub"))
    assert.are.equal(0, run_in(dir, { "-O", "-d", "one", srv.base .. "/file.txt" }))
    assert.are.equal("one", proc.readfile(dir .. "/file.txt"))
    assert.are.equal(0, run_in(dir, { "--remote-name", "--output-dir", "sub", "-d", "two", srv.base .. "/f2" }))
    assert.are.equal("two", proc.readfile(dir .. "/sub/f2"))
    assert.are.equal(0, run_in(dir, { "--remote-name-all", "-d", "x", srv.base .. "/m1", srv.base .. "/m2" }))
    assert.are.equal("x", proc.readfile(dir .. "/m1"))
    assert.are.equal("x", proc.readfile(dir .. "/m2"))
    -- -O with several URLs names each one's file (luaretry(1); curl's names
    -- the first, and writes the others to standard output)
    assert.are.equal(0, run_in(dir, { "-O", "-d", "y", srv.base .. "/m3", srv.base .. "/m4" }))
    assert.are.equal("y", proc.readfile(dir .. "/m3"))
    assert.are.equal("y", proc.readfile(dir .. "/m4"))
    -- the Dockerfile line: curl -fsSLO --retry 3 URL
    assert.are.equal(0, run_in(dir, { "-fsSLO", "-d", "df", srv.base .. "/docker.tgz" }))
    assert.are.equal("df", proc.readfile(dir .. "/docker.tgz"))
  end)

  it("-b reads cookies at the start, -c writes the jar at the end; cookies received are sent on the retry", function ()
    local jar_in, jar_out = tmp .. "/in.jar", tmp .. "/out.jar"
    proc.writefile(jar_in, "127.0.0.1\tFALSE\t/\tFALSE\t0\tfrom_file\tyes\n")
    local r = run({ "-b", jar_in, "-c", jar_out, srv.base .. "/once503" })
    assert.are.equal(0, r.code, r.stderr)
    local seen = srv:requests_on("/once503")
    assert.are.equal("from_file=yes", seen[1].headers.cookie)
    assert.matches("seen=1", seen[2].headers.cookie)
    assert.matches("from_file=yes", seen[2].headers.cookie)
    local jar = proc.readfile(jar_out)
    assert.matches("\tseen\t1", jar)
    assert.matches("\tfrom_file\tyes", jar)
    -- a batch: one store for every URL, the jar written once at the end
    srv:reset()
    local jar2 = tmp .. "/batch.jar"
    r = run({ "-c", jar2, "--parallel-max", "1", srv.base .. "/once503", srv.base .. "/after" })
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("seen=1", srv:requests_on("/once503")[2].headers.cookie)
    assert.matches("seen=1", srv:requests_on("/after")[1].headers.cookie)
    assert.matches("\tseen\t1", proc.readfile(jar2))
    r = run({ "--cookie", "a=1; b=2", srv.base .. "/inline" })
    assert.are.equal(0, r.code, r.stderr)
    local sent = srv:requests_on("/inline")[1].headers.cookie
    assert.is_truthy(sent == "a=1; b=2" or sent == "b=2; a=1", sent)
  end)

  it("-b NAME=VALUE goes to the first host only, across -L to another; -c writes none of them", function ()
    local other = "http://other.invalid:" .. srv.port
    local resolve = { "--resolve", "other.invalid:" .. srv.port .. ":127.0.0.1" }
    local r = run({ "-L", resolve[1], resolve[2], "-b", "a=1; b=2", srv.base .. "/to?" .. other .. "/landing" })
    assert.are.equal(0, r.code, r.stderr)
    local sent = srv:requests_on("/to")[1].headers.cookie -- the store's order
    assert.is_truthy(sent == "a=1; b=2" or sent == "b=2; a=1", sent)
    local landed = srv:requests_on("/landing")
    assert.are.equal(1, #landed)
    assert.is_nil(landed[1].headers.cookie)
    -- a batch: each URL's own host has them; the retry too, beside the server's cookie
    srv:reset()
    local jar = tmp .. "/inline.jar"
    r = run({ resolve[1], resolve[2], "-b", "a=1", "-c", jar, "--parallel-max", "1", srv.base .. "/once503",
              other .. "/second" })
    assert.are.equal(0, r.code, r.stderr)
    local seen = srv:requests_on("/once503")
    assert.are.equal("a=1", seen[1].headers.cookie)
    assert.matches("a=1", seen[2].headers.cookie)
    assert.matches("seen=1", seen[2].headers.cookie)
    assert.are.equal("a=1", srv:requests_on("/second")[1].headers.cookie)
    local written = proc.readfile(jar)
    assert.matches("\tseen\t1", written)
    assert.is_nil(written:find("\ta\t1", 1, true), written)
    os.remove(jar)
  end)

  it("-c LINK writes the file the link names, in one step, the link kept; a link to nowhere is an error", function ()
    local target, link = tmp .. "/target.jar", tmp .. "/link.jar"
    proc.writefile(target, "127.0.0.1\tFALSE\t/\tFALSE\t0\told\tv\n")
    proc.sh("ln -s target.jar " .. q(link))
    local r = run({ "-c", link, srv.base .. "/once503" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("link", proc.readfile_cmd("test -L " .. q(link) .. " && echo -n link"))
    assert.matches("\tseen\t1", proc.readfile(target))
    local dangling = tmp .. "/dangling.jar"
    proc.sh("ln -s nowhere/x.jar " .. q(dangling))
    srv:reset()
    r = run({ "-c", dangling, srv.base .. "/once503" })
    assert.are_not.equal(0, r.code)
    assert.matches("%-c .*dangling%.jar: a link to a file that cannot be reached", r.stderr)
    assert.matches("the cookie jar could not be written", r.stderr)
    assert.are.equal("link", proc.readfile_cmd("test -L " .. q(dangling) .. " && echo -n link"))
    for _, f in ipairs { target, link, dangling } do os.remove(f) end
  end)

  -- libcurl's FLUSH reports no failure to save: the jar was lost, exit 0
  it("-c FILE that cannot be written is said, exit 1; what is written is libcurl's jar", function ()
    for _, case in ipairs({ { tmp .. "/no/such/jar", "No such file or directory" }, { tmp, "Is a directory" },
                            { "/dev/full", "No space left on device" } }) do
      srv:reset()
      local r = run({ "-c", case[1], srv.base .. "/once503" })
      assert.are.equal(1, r.code, r.stderr)
      assert.matches("-c " .. case[1] .. ": [^\n]*" .. case[2], r.stderr)
      assert.matches("the cookie jar could not be written", r.stderr, 1, true)
    end
    srv:reset()
    local jar = tmp .. "/ok.jar"
    local r = run({ "-c", jar, srv.base .. "/once503" })
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("^# Netscape HTTP Cookie File\n# https://curl.se/docs/http%-cookies.html\n" ..
                   "# This file was generated by libcurl! Edit at your own risk.\n\n" ..
                   "127%.0%.0%.1\tFALSE\t/\tFALSE\t0\tseen\t1\n$", proc.readfile(jar))
    assert.are.same({}, proc.leftovers(tmp))
  end)

  it("--resolve HOST:PORT:ADDRESS", function ()
    local r = run({ "--resolve", "luaretry.invalid:" .. srv.port .. ":127.0.0.1",
                    "http://luaretry.invalid:" .. srv.port .. "/resolved" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("luaretry.invalid:" .. srv.port, srv:requests_on("/resolved")[1].headers.host)
  end)

  it("-x/--proxy, and the http_proxy variable beside it", function ()
    local r = run({ "-x", srv.base, "http://luaretry.invalid/proxied" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("luaretry.invalid", srv:requests_on("/proxied")[1].headers.host)
    r = run({ "http://luaretry.invalid/from-env" }, { env = { "http_proxy=" .. srv.base } })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(1, #srv:requests_on("/from-env"))
  end)

  -- each was retried as a transport error (4 attempts, exit 4) where curl
  -- fails at once (49, 7): no retry makes a bad option good
  it("a bad --resolve or -x is a usage error naming it, before any attempt", function ()
    local host = "luaretry.invalid:" .. srv.port
    for _, case in ipairs({
      { { "--resolve", "luaretry.invalid:99999:127.0.0.1" }, "the port is above 65535" },
      { { "--resolve", host .. ":nothost" }, "not an IPv4 or IPv6 address" },
      { { "--resolve", host .. ":" }, "no address" },
      { { "--resolve", host .. ":[::1" }, "an unclosed [" },
      { { "-x", "foo://bar" }, "-x foo://bar: the scheme foo is no proxy's" },
      { { "--proxy", "http://[::1" }, "--proxy http://[::1: not a proxy URL" },
    }) do
      local r = run(proc.concat(case[1], { "--retry", "3", "http://" .. host .. "/resolved" }))
      assert.are.equal(2, r.code, r.stderr)
      assert.matches(case[2], r.stderr, 1, true)
      assert.is_nil(r.stderr:find("attempt", 1, true), r.stderr)
    end
    assert.are.equal(0, #srv:requests())
    -- what libcurl takes is taken: several addresses, [IPv6], a removal, "" (no proxy)
    local r = run({ "--resolve", host .. ":[::1],127.0.0.1", "--resolve", "-other.invalid:80", "-x", "",
                    "http://" .. host .. "/resolved" })
    assert.are.equal(0, r.code, r.stderr)
  end)

  it("-K/--config: curl's config syntax for luaretry's options", function ()
    local cfg = tmp .. "/cfg"
    proc.writefile(cfg, table.concat({
      "# a comment", "", "silent", "request = PUT", '-H "X-One: 1"', 'header: "X-Two: a \\"quoted\\" 2"',
      'url = "' .. srv.base .. '/configured"', "data-binary=@" .. tmp .. "/up.txt" }, "\n") .. "\n")
    local r = run({ "-K", cfg })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("", r.stderr)
    local s = srv:requests_on("/configured")[1]
    assert.are.equal("PUT", s.method)
    assert.are.equal("1", s.headers["x-one"])
    assert.are.equal('a "quoted" 2', s.headers["x-two"])
    assert.are.equal(11, s.body_len)
    proc.writefile(cfg, "silent yes\n")
    r = run({ srv.base .. "/x", "--config", cfg })
    assert.are.equal(2, r.code)
    assert.matches("line 1: %-%-silent takes no value", r.stderr)
  end)

  -- what is wrong in a -K file is named with its file and line, and a -K
  -- that is no file says why (a folder read as an empty file)
  it("-K: an error in the file names the file and line; a folder or a missing file says which", function ()
    local cfg = tmp .. "/bad.cfg"
    proc.writefile(cfg, "# fine\nsilent\nbogus-opt\n")
    local r = run({ srv.base .. "/k", "-K", cfg })
    assert.are.equal(2, r.code)
    assert.matches("^luaretry: %-K " .. cfg:gsub("%p", "%%%0") .. ", line 3: run: unknown option %-%-bogus%-opt\n", r.stderr)
    proc.writefile(cfg, "max-time = soon\n")
    r = run({ srv.base .. "/k", "-K", cfg })
    assert.are.equal(2, r.code)
    assert.matches("^luaretry: %-K [^\n]*, line 1: run: %-%-max%-time soon: ", r.stderr)
    r = run({ srv.base .. "/k", "-K", tmp })
    assert.are.equal(2, r.code)
    assert.matches("^luaretry: run: %-K " .. tmp:gsub("%p", "%%%0") .. ": Is a directory\n", r.stderr)
    r = run({ srv.base .. "/k", "-K", tmp .. "/none" })
    assert.are.equal(2, r.code)
    assert.matches("^luaretry: run: %-K [^\n]*/none: No such file or directory\n", r.stderr)
    assert.are.equal(0, #srv:requests_on("/k"))
  end)

  -- luaretry(1) -K: a line is read whole, up to 8000000 bytes (libcurl's
  -- longest URL); it was cut at 8191 bytes, its rest read as the next
  -- line ("an unclosed quote", "unknown option --aaaa..."), and a failed
  -- read was taken as the file's end, the lines before it applied
  it("-K: a long line is taken whole; one too long, a NUL byte or a failed read is refused, naming the file", function ()
    local long = string.rep("b", 8300)
    local cfg = tmp .. "/a.cfg"
    proc.writefile(cfg, 'header = "X-Long: ' .. long .. '"\nurl = ' .. srv.base .. "/long\n")
    local r = run({ "-K", cfg })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(long, srv:requests_on("/long")[1].headers["x-long"])
    local query = string.rep("a", 8200)
    proc.writefile(cfg, "url = " .. srv.base .. "/long?" .. query) -- one line, no newline
    r = run({ "-K", cfg })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(query, srv:requests_on("/long")[2].query)
    srv:reset()
    local f = assert(io.open(cfg, "wb"))
    f:write("silent\nurl = ", srv.base, "/never?", string.rep("a", 8000000), "\n")
    f:close()
    r = run({ "-K", cfg })
    assert.are.equal(2, r.code)
    assert.matches("^luaretry: run: %-K " .. cfg:gsub("%p", "%%%0") ..
                   ", line 2: longer than 8000000 bytes, more than any URL or value: refused\n", r.stderr)
    proc.writefile(cfg, "url = " .. srv.base .. "/never\0tail\n")
    r = run({ "-K", cfg })
    assert.are.equal(2, r.code)
    assert.matches("^luaretry: run: %-K [^\n]*, line 1: holds a NUL byte: refused\n", r.stderr)
    -- a file whose read fails at once (EIO): not an empty file
    r = run({ srv.base .. "/never", "-K", "/proc/self/mem" })
    assert.are.equal(2, r.code)
    assert.matches("^luaretry: run: %-K /proc/self/mem: Input/output error\n", r.stderr)
    assert.are.equal(0, #srv:requests())
  end)

  -- luaretry(1) -K: a stop signal while the file is read ends the run
  -- before any attempt, as with -d @- or --urls -: the lines read so far
  -- were applied and the URL fetched, its attempt cancelled
  it("-K from a pipe cut by SIGTERM: exit 130, interrupted, no attempt", function ()
    local fifo = tmp .. "/k.fifo"
    assert.are.equal(0, proc.sh("mkfifo " .. q(fifo)))
    local jobdir = proc.tmpdir()
    local job = proc.spawn({ "run", srv.base .. "/never", "--stats", "-K", fifo }, jobdir)
    -- read and write: never blocks; luaretry's open finds a writer
    local w = assert(io.open(fifo, "r+"))
    finally(function () w:close(); job:stop(); proc.rmtree(jobdir) end)
    w:write("header = \"X-Read: 1\"\n")
    w:flush()
    assert.is_truthy(job:blocked_on_pipe(), "blocked in the read")
    job:signal("TERM")
    local code = job:wait(5)
    local stderr = job:stderr()
    assert.are.equal(130, code, tostring(stderr))
    -- no attempt line, no --stats line: no call was begun
    assert.are.equal("luaretry: interrupted\n", stderr)
    assert.are.equal(0, #srv:requests())
  end)

  it("-Z runs a batch's URLs at once (curl's --parallel); --parallel-max N bounds them", function ()
    local urls = { srv.base .. "/slow", srv.base .. "/slow", srv.base .. "/slow" }
    local function times(extra)
      srv:reset()
      local args = { table.unpack(urls) }
      for _, v in ipairs(extra) do args[#args + 1] = v end
      local r = run(args)
      assert.are.equal(0, r.code, r.stderr)
      local t = {}
      for _, s in ipairs(srv:requests_on("/slow")) do t[#t + 1] = s.time end
      table.sort(t)
      return t
    end
    local t = times({ "-Z" })
    -- all three began before the first answered (1.5 s after it came, on
    -- the server's clock); one at a time, the second would come after that
    assert.is_true(t[3] - t[1] < 1.5, ("the three came over %.3f s"):format(t[3] - t[1]))
    t = times({ "--parallel-max", "1" })
    assert.is_true(t[2] - t[1] >= 1.4 and t[3] - t[2] >= 1.4)
  end)

  it("refuses what does not go together, before any request", function ()
    for _, args in ipairs({ { "-F", "novalue" }, { "-O", "-o", tmp .. "/x" }, { "-F", "a=b", "-d", "x" },
                            { "-G", "-T", tmp .. "/up.txt" }, { "--resolve", "nocolon" },
                            { "-K", tmp .. "/missing.cfg" } }) do
      args[#args + 1] = srv.base .. "/never"
      local r = run(args)
      assert.are.equal(2, r.code, table.concat(args, " "))
    end
    assert.are.equal(0, #srv:requests())
  end)
end)
