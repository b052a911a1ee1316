-- Policies by name: POLICY is a file when one exists,
-- else NAME or NAME.lua in LUARETRY_PATH's folders, then
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

  setup(function () srv = proc.server(here .. "/run/server.lua") end)
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

  it("run http URL: the shipped http.lua by its name, and as http.lua", function ()
    for _, name in ipairs({ "http", "http.lua" }) do
      srv:reset()
      local r = run({ "run", name, srv.base .. "/new" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("new content\n", r.stdout)
      assert.matches("attempt 1/10: 200 %-> success", r.stderr)
    end
  end)

  it("a file that exists is that file, even where a name would find another", function ()
    proc.sh("mkdir -p " .. proc.q(tmp .. "/cwd"))
    proc.writefile(tmp .. "/cwd/http", MINE)  -- a file named like the shipped policy
    local bin = proc.readfile_cmd("realpath " .. proc.q(proc.bin)):gsub("\n$", "")
    local code = proc.sh("cd " .. proc.q(tmp .. "/cwd") .. " && env HOME=/nonexistent " ..
                         proc.q(bin) .. " run http " .. proc.q(srv.base .. "/always503") ..
                         " </dev/null >/dev/null 2>" .. proc.q(tmp .. "/err"))
    assert.are.equal(4, code, proc.readfile(tmp .. "/err"))
    assert.matches("attempt 3/3: 503 %-> exhausted", proc.readfile(tmp .. "/err"))
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

  it("the Lua module's load takes a name on the same path", function ()
    local p = assert(luaretry.load("memorystore"))
    assert.matches("/policies/memorystore%.lua$", p:tuning().source)
    local none, msg = luaretry.load("nosuch-policy")
    assert.is_nil(none)
    assert.matches("^nosuch%-policy: no such file, nor in ", msg)
  end)
end)
