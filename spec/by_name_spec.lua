-- Policies by name: POLICY with a '/' or ending in .lua is a file; a bare
-- NAME is NAME or NAME.lua in LUARETRY_PATH's folders (never the current
-- folder), then
-- $XDG_CONFIG_HOME/luaretry/policies (~/.config/...), then the installed
-- share/luaretry/policies (the build tree's policies/ here); the same for
-- run, check, simulate, `list` and the Lua module's load.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
local proc = require "support.proc"
local luaretry = require "luaretry"

local MINE = [[
-- mine.lua: a policy of the user's own, three attempts
name = "mine"
max_attempts = 3
deadline = 20
backoff = { initial = 0.01, jitter = "none" }
local retry = require "retry"          -- the installed helpers still reach
is_transient = retry.status_in { 503 }
]]

describe("policies by name", function ()
  local srv, tmp, env

  setup(function () srv = proc.server(here .. "/fixtures/run/server.lua") end)
  teardown(function () if srv then srv:stop() end end)
  before_each(function ()
    srv:reset()
    tmp = proc.tmpdir()
    -- no folder of the machine's user may leak into what these specs see
    env = { "HOME=" .. tmp .. "/home", "XDG_CONFIG_HOME=", "LUARETRY_PATH=" }
  end)
  after_each(function () proc.rmtree(tmp) end)

  local function run(args, more_env)
    local e = {}
    for _, kv in ipairs(env) do e[#e + 1] = kv end
    for _, kv in ipairs(more_env or {}) do e[#e + 1] = kv end
    return proc.run(args, { env = e, timeout = 30 })
  end

  it("run http URL: the shipped http.lua by its name", function ()
    local r = run({ "run", "http", srv.base .. "/new" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("new content\n", r.stdout)
    assert.matches("attempt 1/10: 200 %-> success", r.stderr)
  end)

  -- in folder cwd: luaretry ARGS, with only `env` set; code, stderr
  local function run_in(cwd, args)
    local bin = proc.readfile_cmd("realpath " .. proc.q(proc.bin)):gsub("\n$", "")
    local words = {}
    for _, a in ipairs(args) do words[#words + 1] = proc.q(a) end
    local code = proc.sh("cd " .. proc.q(cwd) .. " && timeout 20 env " .. table.concat(env, " ") .. " " ..
                         proc.q(bin) .. " " .. table.concat(words, " ") ..
                         " </dev/null >/dev/null 2>" .. proc.q(tmp .. "/err"))
    return code, proc.readfile(tmp .. "/err")
  end

  it("a bare name is never a file of the current folder; a path or NAME.lua is a file", function ()
    proc.sh("mkdir -p " .. proc.q(tmp .. "/cwd"))
    -- files named like the shipped policy, as in a shared folder: their
    -- prepare could send the caller's Authorization header anywhere
    proc.writefile(tmp .. "/cwd/http", MINE)
    proc.writefile(tmp .. "/cwd/nosuch", MINE)
    local code, err = run_in(tmp .. "/cwd", { "run", "http", srv.base .. "/new" })
    assert.are.equal(0, code, err)
    assert.matches("attempt 1/10: 200 %-> success", err)  -- the shipped one
    code, err = run_in(tmp .. "/cwd", { "run", "nosuch", srv.base .. "/new" })
    assert.are.equal(3, code, err)
    assert.matches("policy nosuch: no such file, nor nosuch%(%.lua%) in ", err)
    assert.matches("never looked up in the current folder: run %./nosuch", err)
    code, err = run_in(tmp .. "/cwd", { "check", "nosuch" })
    assert.are.equal(3, code, err)
    -- ./http is the file
    code, err = run_in(tmp .. "/cwd", { "run", "./http", srv.base .. "/always503" })
    assert.are.equal(4, code, err)
    assert.matches("attempt 3/3: 503 %-> exhausted", err)
    -- NAME.lua is a file of the current folder, never looked up
    code, err = run_in(tmp .. "/cwd", { "run", "http.lua", srv.base .. "/new" })
    assert.are.equal(3, code, err)
    assert.matches("policy http%.lua: no such file\n", err)
    proc.writefile(tmp .. "/cwd/http.lua", MINE)
    code, err = run_in(tmp .. "/cwd", { "run", "http.lua", srv.base .. "/always503" })
    assert.are.equal(4, code, err)
    assert.matches("attempt 3/3: 503 %-> exhausted", err)
  end)

  it("a FIFO named as a policy is refused, never opened", function ()
    proc.sh("mkdir -p " .. proc.q(tmp .. "/cwd") .. " && mkfifo " .. proc.q(tmp .. "/cwd/pipe.lua"))
    local code, err = run_in(tmp .. "/cwd", { "run", "pipe.lua", srv.base .. "/new" })
    assert.are.equal(3, code, err)
    assert.matches("policy pipe%.lua: not a regular file", err)
    assert.are.equal(0, #srv:requests())
  end)

  it("LUARETRY_PATH comes first, then XDG_CONFIG_HOME, then the installed folder", function ()
    proc.sh("mkdir -p " .. proc.q(tmp .. "/a") .. " " .. proc.q(tmp .. "/xdg/luaretry/policies"))
    proc.writefile(tmp .. "/xdg/luaretry/policies/http.lua", MINE)
    -- XDG's http.lua stands in for the shipped one
    local r = run({ "run", "http", srv.base .. "/always503" }, { "XDG_CONFIG_HOME=" .. tmp .. "/xdg" })
    assert.are.equal(4, r.code, r.stderr)
    assert.matches("attempt 3/3", r.stderr)
    -- and LUARETRY_PATH's before XDG's
    proc.writefile(tmp .. "/a/http.lua", (MINE:gsub("max_attempts = 3", "max_attempts = 2")))
    r = run({ "run", "http", srv.base .. "/always503" },
            { "XDG_CONFIG_HOME=" .. tmp .. "/xdg", "LUARETRY_PATH=" .. tmp .. "/none:" .. tmp .. "/a" })
    assert.are.equal(4, r.code, r.stderr)
    assert.matches("attempt 2/2: 503 %-> exhausted", r.stderr)
  end)

  it("without XDG_CONFIG_HOME the user's folder is ~/.config/luaretry/policies", function ()
    proc.sh("mkdir -p " .. proc.q(tmp .. "/home/.config/luaretry/policies"))
    proc.writefile(tmp .. "/home/.config/luaretry/policies/mine.lua", MINE)
    local r = run({ "run", "mine", srv.base .. "/always503" })
    assert.are.equal(4, r.code, r.stderr)
    assert.matches("attempt 3/3: 503 %-> exhausted", r.stderr)
  end)

  it("a name found nowhere: exit 3, and every folder looked in is named", function ()
    local r = run({ "run", "nosuch", srv.base .. "/new" }, { "LUARETRY_PATH=" .. tmp .. "/a" })
    assert.are.equal(3, r.code)
    assert.matches("policy nosuch: no such file, nor nosuch%(%.lua%) in " .. tmp:gsub("%p", "%%%0") ..
                   "/a, " .. tmp:gsub("%p", "%%%0") .. "/home/%.config/luaretry/policies, .*/policies", r.stderr)
    assert.are.equal(0, #srv:requests())
    -- a path is a path: never looked up
    r = run({ "run", "./http", srv.base .. "/new" })
    assert.are.equal(3, r.code)
    assert.matches("policy %./http: no such file\n", r.stderr)
  end)

  it("check and simulate take names too", function ()
    local r = run({ "check", "gcs" })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.matches("^[^\n]*/policies/gcs%.lua: ok", r.stdout)
    r = run({ "simulate", "iam", "--attempts", "3" })
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("attempt 3: exhausted", r.stdout)
  end)

  it("list: the policies it can see with their one-line descriptions, a shadowed name once", function ()
    proc.sh("mkdir -p " .. proc.q(tmp .. "/a"))
    proc.writefile(tmp .. "/a/mine.lua", MINE)
    proc.writefile(tmp .. "/a/gcs.lua", "-- my own gcs\nmax_attempts = 2\n")
    proc.writefile(tmp .. "/a/notes.txt", "not a policy")
    -- a policy's spec beside it, fault scripts in a subfolder, a folder
    -- named like a policy: none of them is one
    proc.writefile(tmp .. "/a/mine_spec.lua", "-- the spec of mine\n")
    proc.sh("mkdir -p " .. proc.q(tmp .. "/a/faults") .. " " .. proc.q(tmp .. "/a/dir.lua"))
    proc.writefile(tmp .. "/a/faults/flaky.lua", "-- a fault script\n")
    local r = run({ "list" }, { "LUARETRY_PATH=" .. tmp .. "/a" })
    assert.are.equal(0, r.code, r.stderr)
    local lines = proc.lines(r.stdout)
    assert.are.equal(tmp .. "/a:", lines[1])
    assert.matches("^  gcs +my own gcs$", lines[2])
    assert.matches("^  mine +a policy of the user's own, three attempts$", lines[3])
    assert.matches("/policies:$", lines[4])
    assert.matches("\n  http +the default HTTP policy%.\n", r.stdout)
    assert.matches("\n  iam +Google Cloud Identity and Access Management %(IAM%)%.\n", r.stdout)
    local _, gcs = r.stdout:gsub("\n  gcs ", "")
    assert.are.equal(1, gcs)  -- the shipped gcs is hidden by the user's
    assert.is_nil(r.stdout:find("notes", 1, true))
    assert.is_nil(r.stdout:find("spec", 1, true))
    assert.is_nil(r.stdout:find("flaky", 1, true))
    assert.is_nil(r.stdout:find("dir", 1, true))
    assert.is_nil(r.stdout:find("faults", 1, true))
    r = run({ "list", "--names" }, { "LUARETRY_PATH=" .. tmp .. "/a" })
    assert.are.equal("gcs\nmine\n", r.stdout:sub(1, 9))
    assert.matches("\nhttp\n", r.stdout)
  end)

  it("list: regular files only, never waits on a FIFO; names and descriptions escaped", function ()
    local a = tmp .. "/a"
    proc.sh("mkdir -p " .. proc.q(a .. "/dir.lua") .. " && mkfifo " .. proc.q(a .. "/pipe.lua"))
    proc.writefile(a .. "/evil.lua", "-- clears \27[2J the screen\7\nmax_attempts = 1\n")
    proc.writefile(a .. "/bad\27]0;x.lua", "-- a name with ESC\nmax_attempts = 1\n")
    proc.writefile(a .. "/bom.lua", "\239\187\191-- begins with a BOM\nmax_attempts = 1\n")
    proc.sh("ln -s evil.lua " .. proc.q(a .. "/alias.lua"))
    local r = run({ "list" }, { "LUARETRY_PATH=" .. a })  -- run's timeout: a blocked list fails
    assert.are.equal(0, r.code, r.stderr)
    assert.is_nil(r.stdout:find("pipe", 1, true))
    assert.is_nil(r.stdout:find("dir", 1, true))
    assert.is_nil(r.stdout:find("[\0-\8\11-\31\127]"), r.stdout)  -- no control byte but newline
    assert.matches("\n  evil +clears \\x1b%[2J the screen\\x07\n", r.stdout)
    assert.matches("\n  bad\\x1b%]0;x +a name with ESC\n", r.stdout)
    assert.matches("\n  alias +clears", r.stdout)  -- a link to a regular file is one
    assert.matches("\n  bom +begins with a BOM\n", r.stdout)  -- skipped, as Lua skips it
    assert.matches("never in the current\nfolder; a path with a / or a NAME%.lua is a file%.\n$", r.stdout)
    r = run({ "list", "--names" }, { "LUARETRY_PATH=" .. a })
    assert.are.equal("alias\nbad\\x1b]0;x\nbom\nevil\n", r.stdout:sub(1, 27))
    -- a FIFO named as a policy to check: refused, not waited on
    r = run({ "check", a .. "/pipe.lua" })
    assert.are.equal(3, r.code, r.stdout .. r.stderr)
    assert.matches("pipe%.lua: cannot read: not a regular file", r.stdout)
  end)

  -- the names were padded on their raw length: an escaped one (a tab
  -- shown as \x09, four columns for one byte) pushed its description right
  it("list: descriptions in one column, whatever a name's escapes or UTF-8", function ()
    local a = tmp .. "/a"
    proc.sh("mkdir -p " .. proc.q(a))
    for _, name in ipairs({ "ctl\tname", "caf\195\169", "plain" }) do
      proc.writefile(a .. "/" .. name .. ".lua", "-- the description\nmax_attempts = 1\n")
    end
    local r = run({ "list" }, { "LUARETRY_PATH=" .. a })
    assert.are.equal(0, r.code, r.stderr)
    local columns = {}
    for _, line in ipairs(proc.lines(r.stdout)) do
      local shown = line:match("^  (.-)the description$")
      if shown then columns[#columns + 1] = utf8.len(shown) end
    end
    assert.are.same({ 23, 23, 23 }, columns, r.stdout) -- 22 columns and a space
    assert.matches("\n  ctl\\x09name +the description\n", r.stdout)
  end)

  it("list: linear in the number of files (40000 in four folders, within 1 s of CPU time)", function ()
    local dirs = {}
    for _, d in ipairs({ "a", "b", "c", "d" }) do
      local dir = tmp .. "/" .. d
      dirs[#dirs + 1] = dir
      assert.are.equal(0, proc.sh("mkdir -p " .. proc.q(dir) .. " && cd " .. proc.q(dir) ..
                                  " && seq -f 'p%05g_" .. d .. ".lua' 1 10000 | xargs touch"))
    end
    -- CPU time, not wall time, so that a busy machine does not matter: a
    -- quadratic listing took 2.5 s of it for 30000 names, this one 0.1 s
    local out = tmp .. "/names"
    local code = proc.sh("ulimit -t 1; env LUARETRY_PATH=" .. proc.q(table.concat(dirs, ":")) ..
                         " HOME=" .. proc.q(tmp) .. " " .. proc.q(proc.bin) .. " list --names >" .. proc.q(out))
    assert.are.equal(0, code)
    assert.is_true(#proc.lines(proc.readfile(out)) >= 40000)
  end)

  it("a policy file bigger than the memory limit is refused before it is read", function ()
    local big = tmp .. "/big.lua"
    assert.are.equal(0, proc.sh("truncate -s 100M " .. proc.q(big)))  -- sparse: no disk
    local r = run({ "check", big, "--set", "memory_limit=1048576" })
    assert.are.equal(3, r.code, r.stdout .. r.stderr)
    assert.matches("big%.lua: 104857600 bytes, above the memory limit %(1048576 bytes%): not read", r.stdout)
    r = run({ "run", big, "http://127.0.0.1:1/" })
    assert.are.equal(3, r.code, r.stderr)
    assert.matches("104857600 bytes, above the memory limit %(8388608 bytes%)", r.stderr)
  end)

  it("the Lua module's load takes a name on the same path", function ()
    local p = assert(luaretry.load("memorystore"))
    assert.matches("/policies/memorystore%.lua$", p:tuning().source)
    local none, msg = luaretry.load("nosuch-policy")
    assert.is_nil(none)
    assert.matches("^nosuch%-policy: no such file, nor in ", msg)
  end)
end)
