-- What a curl user meets on day one: --create-dirs (curl's meaning, for -o
-- and --output-dir), the body of a final error answer (its first line in
-- the final log line, even with -o; the whole of it with --fail-with-body,
-- as curl's), and usage errors that say what is wrong first.  The real
-- build/luaretry against the fault server.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
package.path = here .. "/?.lua;" .. package.path
local proc = require "support.proc"

local FAST = { "--set", "backoff.initial=0.01", "--set", "backoff.jitter=none", "--set", "max_attempts=2" }

local function run(...)
  local t = {}
  for _, part in ipairs { ... } do
    if type(part) == "table" then for _, w in ipairs(part) do t[#t + 1] = w end
    else t[#t + 1] = part end
  end
  return proc.run(t, { timeout = 30 })
end

describe("day one", function ()
  local srv, tmp
  setup(function () srv = proc.server(here .. "/fixtures/run/error_body.lua") end)
  teardown(function () if srv then srv:stop() end end)
  before_each(function () tmp = proc.tmpdir() end)
  after_each(function () proc.rmtree(tmp) end)

  describe("--create-dirs", function ()
    it("makes -o FILE's missing folders (mode 0750 less the umask); without it, exit 2", function ()
      local file = tmp .. "/a/b/out.txt"
      local r = run("run", srv.base .. "/ok", "-o", file)
      assert.are.equal(2, r.code)
      assert.matches("^luaretry: run: %-o [^\n]*/a/b/out%.txt: its folder [^\n]*/a/b: No such file or directory\n", r.stderr)
      assert.matches("\nusage: luaretry run", r.stderr)
      r = run("run", srv.base .. "/ok", "--create-dirs", "-o", file)
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("fresh\n", proc.readfile(file))
      local mode = proc.readfile_cmd("stat -c %a " .. proc.q(tmp .. "/a/b")):gsub("%s+$", "")
      local umask = tonumber(proc.readfile_cmd("sh -c umask"), 8)
      assert.are.equal(("%o"):format(tonumber("750", 8) & ~umask), mode)
    end)

    it("makes --output-dir DIR, and folders that exist are fine", function ()
      local dir = tmp .. "/x/y"
      local r = run("run", srv.base .. "/ok", "--output-dir", dir)
      assert.are.equal(2, r.code)
      assert.matches("^luaretry: run: %-%-output%-dir [^\n]*/x/y: No such file or directory\n", r.stderr)
      assert.matches("\nusage: luaretry run", r.stderr)
      r = run("run", srv.base .. "/ok", "--create-dirs", "--output-dir", dir)
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("fresh\n", proc.readfile(dir .. "/ok"))
      r = run("run", srv.base .. "/ok", "--create-dirs", "--output-dir", dir)
      assert.are.equal(0, r.code, r.stderr)
    end)

    it("says which folder it could not make", function ()
      proc.writefile(tmp .. "/file", "")
      local r = run("run", srv.base .. "/ok", "--create-dirs", "-o", tmp .. "/file/sub/out")
      assert.are.equal(2, r.code)
      assert.matches("^luaretry: %-%-create%-dirs: [^\n]*/file/sub: Not a directory\n", r.stderr)
    end)
  end)

  describe("a final error answer's body", function ()
    it("its first line ends the final log line, even with -o (the file is left alone)", function ()
      proc.writefile(tmp .. "/out", "old\n")
      local r = run("run", srv.base .. "/missing", "-o", tmp .. "/out")
      assert.are.equal(1, r.code)
      assert.matches("attempt 1/10: 404 %-> final %([^)]*%); body: {\"error\":\"no such bucket\"}\n", r.stderr)
      assert.is_nil(r.stderr:find("second line", 1, true))
      assert.are.equal("old\n", proc.readfile(tmp .. "/out"))
      -- -q: it is the one line; a retried answer's line does not carry it
      r = run("run", srv.base .. "/gone", FAST, "-q", "-o", tmp .. "/out")
      assert.are.equal(4, r.code)
      assert.are.same({ "luaretry: attempt 2/2: 503 -> exhausted (max_attempts): gave up after 2 attempts" },
                      { (r.stderr:gsub(" over [%d.]+ s; body: try later\n$", "")) })
      r = run("run", srv.base .. "/gone", FAST)
      assert.is_nil(r.stderr:match("retry in [^\n]*body"))
    end)

    it("escaped, and cut", function ()
      local r = run("run", srv.base .. "/forged", "-o", tmp .. "/out")
      assert.are.equal(1, r.code)
      assert.matches("; body: denied\\x1b%[2Jx+%.%.%.\n$", r.stderr)
      assert.is_nil(r.stderr:find("\27", 1, true))
      assert.is_true(#proc.lines(r.stderr)[1] < 400)
    end)

    -- a NUL byte ended the quote: "; body: " with nothing after it
    it("a NUL byte in it is escaped, not the end of the quote", function ()
      local r = run("run", srv.base .. "/nul", FAST, "-q")
      assert.are.equal(4, r.code)
      assert.matches("; body: \\x00\\x01\\x02 bad\n$", r.stderr)
    end)

    it("--fail-with-body: -o FILE gets the answer, as curl writes it; the exit says it failed", function ()
      proc.writefile(tmp .. "/out", "old\n")
      local r = run("run", srv.base .. "/missing", "--fail-with-body", "-o", tmp .. "/out")
      assert.are.equal(1, r.code)
      assert.are.equal('{"error":"no such bucket"}\nsecond line\n', proc.readfile(tmp .. "/out"))
      -- no answer at all (nothing listens): the old file stays
      proc.writefile(tmp .. "/out", "old\n")
      r = run("run", "http://127.0.0.1:1/x", FAST, "--fail-with-body", "-o", tmp .. "/out")
      assert.are.equal(4, r.code)
      assert.are.equal("old\n", proc.readfile(tmp .. "/out"))
      -- standard output has it anyway; -f and --fail-with-body do not go together
      r = run("run", srv.base .. "/missing", "--fail-with-body")
      assert.are.equal('{"error":"no such bucket"}\nsecond line\n', r.stdout)
      r = run("run", srv.base .. "/missing", "-f", "--fail-with-body")
      assert.are.equal(2, r.code)
      assert.matches("^luaretry: run: %-f and %-%-fail%-with%-body, not both", r.stderr)
    end)

    it("a batch's summary line of a failed URL quotes it too", function ()
      local r = run("run", "http", srv.base .. "/ok", srv.base .. "/missing", "--output-dir", tmp, "-q")
      assert.are.equal(1, r.code)
      assert.are.same({ "luaretry: [2] " .. srv.base .. "/missing: final, 1 attempt, status 404, " },
                      { (r.stderr:gsub("[%d.]+ s, exit 1; body: {\"error\":\"no such bucket\"}\n$", "")) })
    end)

    it("--fail-with-body in a batch: a failed URL's answer in its file", function ()
      local r = run("run", "http", srv.base .. "/ok", srv.base .. "/missing", "--output-dir", tmp,
                    "--fail-with-body")
      assert.are.equal(1, r.code)
      assert.are.equal("fresh\n", proc.readfile(tmp .. "/ok"))
      assert.are.equal('{"error":"no such bucket"}\nsecond line\n', proc.readfile(tmp .. "/missing"))
      r = run("run", "http", srv.base .. "/missing", srv.base .. "/ok", "--output-dir", tmp .. "/2",
              "--create-dirs")
      assert.is_nil(proc.readfile(tmp .. "/2/missing"))
    end)
  end)

  describe("usage errors", function ()
    it("say what is wrong on their first line, before the synopsis", function ()
      for _, case in ipairs {
        { { "run" }, "^luaretry: run: a URL, %-%- COMMAND or POLICY is needed" },
        { { "run", "http", "--bogus" }, "^luaretry: run: unknown option %-%-bogus\n" },
        { { "run", "--", }, "^luaretry: run: %-%- needs a COMMAND\n" },
        { { "run", "https://h/x", "--", "true" }, "^luaretry: run: a URL or a COMMAND, not both\n" },
      } do
        local r = run(table.unpack(case[1]))
        assert.are.equal(2, r.code)
        assert.matches(case[2], r.stderr)
        assert.matches("\nusage: luaretry run", r.stderr)
      end
    end)

    -- a --set that is no NAME=VALUE was a policy error (3, no synopsis)
    -- in run, simulate and fleet, a usage error only in check; nothing runs
    it("a --set without NAME=VALUE is a usage error in every command that takes one", function ()
      local tmp = proc.tmpdir()
      finally(function () proc.rmtree(tmp) end)
      for _, case in ipairs {
        { "run", "--set", "foo", "--", "sh", "-c", "echo ran > " .. tmp .. "/ran" },
        { "simulate", "command", "--set", "foo" },
        { "check", "command", "--set", "foo" },
        { "fleet", "command", "--fleet", "local", "--set", "foo" },
      } do
        local r = run(table.unpack(case))
        assert.are.equal(2, r.code, r.stderr)
        assert.matches("^luaretry: [%a ]-:? ?%-%-set foo: expected NAME=VALUE\nusage: luaretry " .. case[1], r.stderr)
        assert.are.equal("", r.stdout)
      end
      assert.is_nil(proc.readfile(tmp .. "/ran"))
    end)

    it("an empty POLICY says what it wanted", function ()
      local r = run("run", "", "http://127.0.0.1:9/")
      assert.are.equal(3, r.code)
      assert.matches("^luaretry: POLICY '': expected a policy's name", r.stderr)
    end)

    -- a command's error shows that command's synopsis, not all fourteen
    -- lines of every command's: the message stays in sight
    it("show the synopsis of the command they are about, and where its options are told", function ()
      for _, case in ipairs {
        { { "simulate", "http", "--seed", "-5" }, "simulate", 4 },
        { { "check" }, "check", 1 },
        { { "run", "http", "--bogus" }, "run", 4 },
        { { "list", "x" }, "list", 1 },
        { { "fleet" }, "fleet", 1 },
        { { "faults" }, "faults", 1 },
        { { "demo", "x" }, "demo", 1 },
      } do
        local r = run(table.unpack(case[1]))
        local cmd = case[2]
        assert.are.equal(2, r.code, r.stderr)
        local lines = {}
        for line in r.stderr:gmatch("[^\n]+") do lines[#lines + 1] = line end
        -- the message, the command's synopsis lines, the pointer to its help
        assert.are.equal(case[3] + 2, #lines, r.stderr)
        assert.matches("^luaretry: ", lines[1])
        assert.matches("^usage: luaretry " .. cmd .. "%f[^%a]", lines[2])
        for i = 3, #lines - 1 do assert.matches("^       ", lines[i]) end
        for i = 2, #lines - 1 do -- no other command's line
          local named = lines[i]:match("^[usage: ]+luaretry (%a+)")
          assert.is_true(named == nil or named == cmd, r.stderr)
        end
        assert.are.equal("'luaretry help " .. cmd .. "' tells every option.", lines[#lines])
      end
      -- no command, or one that does not exist: every command's synopsis
      for _, args in ipairs { {}, { "bogus" }, { "help", "nope" } } do
        local r = run(table.unpack(args))
        assert.are.equal(2, r.code)
        for _, cmd in ipairs { "run", "check", "simulate", "list", "fleet", "faults", "demo" } do
          assert.matches("luaretry " .. cmd .. "[ \n]", r.stderr)
        end
      end
    end)
  end)
end)
