-- Help where people look: `luaretry help [COMMAND]`,
-- `COMMAND --help`, --version, the man pages (mandoc -Tlint clean) and the
-- bash and zsh completion, which agree with the options `run` takes.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
local proc = require "support.proc"
local q = proc.q

local root = proc.root
local BASH = root .. "/core/cli/completion/luaretry.bash"
local ZSH = root .. "/core/cli/completion/_luaretry"
local MAN1, MAN5 = root .. "/core/cli/man/luaretry.1", root .. "/core/cli/man/luaretry-policy.5"

-- The options of `run` the bash completion offers.
local function run_options()
  local text = proc.readfile(BASH)
  local list = text:match('_luaretry_run_options="(.-)"')
  local t = {}
  for opt in list:gmatch("%S+") do t[#t + 1] = opt end
  return t
end

-- What bash completes for the words (the last one being completed).
local function complete(words)
  local bin = proc.readfile_cmd("realpath " .. q(proc.bin)):gsub("\n$", "")
  local quoted = { q(bin) }
  for i = 2, #words do quoted[i] = q(words[i]) end
  local script = "source " .. q(BASH) .. "; COMP_WORDS=(" .. table.concat(quoted, " ") .. "); " ..
                 "COMP_CWORD=" .. (#words - 1) .. "; _luaretry; printf '%s\\n' \"${COMPREPLY[@]}\""
  local out = proc.readfile_cmd("cd " .. q(root) .. " && env -u LD_PRELOAD HOME=/nonexistent bash -c " .. q(script))
  local t = {}
  for line in out:gmatch("[^\n]+") do t[line] = true end
  return t
end

describe("help", function ()
  it("luaretry help and --help: the commands, the search path, the exit statuses", function ()
    for _, args in ipairs({ { "help" }, { "--help" } }) do
      local r = proc.run(args)
      assert.are.equal(0, r.code)
      for _, cmd in ipairs({ "run", "check", "simulate", "list", "faults", "demo", "help" }) do
        assert.matches("\n  " .. cmd .. " ", r.stdout)
      end
      assert.matches("LUARETRY_PATH", r.stdout)
      assert.matches("Exit status: 0 success", r.stdout)
    end
  end)

  it("luaretry help COMMAND is COMMAND --help, for every command", function ()
    for _, cmd in ipairs({ "run", "check", "simulate", "list", "faults", "demo" }) do
      local a, b = proc.run({ "help", cmd }), proc.run({ cmd, "--help" })
      assert.are.equal(0, a.code, cmd)
      assert.are.equal(0, b.code, cmd)
      assert.are.equal(a.stdout, b.stdout)
      assert.matches("^luaretry " .. cmd, a.stdout)
    end
    assert.are.equal(proc.run({ "help", "run" }).stdout, proc.run({ "run", "http", "-h" }).stdout)
    local r = proc.run({ "help", "nope" })
    assert.are.equal(2, r.code)
  end)

  it("run --help says what curl's time options mean here", function ()
    local text = proc.run({ "run", "--help" }).stdout
    assert.matches("%-m, %-%-max%-time SECONDS +per attempt, as curl's: the policy's attempt_timeout", text)
    assert.matches("%-%-retry%-max%-time SECONDS +the whole call, waits included: the policy's deadline", text)
    assert.matches("%-%-connect%-timeout SECONDS", text)
    assert.matches("default luaretry/%d+%.%d+%.%d+", text)
  end)

  it("every option of run is taken, shown by run --help, in luaretry(1), and completed", function ()
    local help = proc.run({ "run", "--help" }).stdout
    local man = proc.readfile(MAN1):gsub("\\%-", "-")
    for _, opt in ipairs(run_options()) do
      if opt ~= "--help" then
        local long = opt:match("^%-%-([%w-]+)")
        assert.is_truthy(help:find(opt, 1, true), opt .. " not in run --help")
        if long and opt ~= "--stats=json" and opt ~= "--data-ascii" then
          assert.is_truthy(man:find("Fl " .. opt:sub(2), 1, true) or man:find(", " .. opt:sub(2), 1, true) or
                           man:find("Fl " .. opt:sub(2, 2) .. " , " .. opt:sub(2), 1, true) or
                           man:find("\\" .. opt, 1, true) or man:find(opt, 1, true),
                           opt .. " not in luaretry.1")
        end
        -- taken: whatever else fails, it is not an unknown option
        local r = proc.run({ "run", "http", opt, "1" })
        assert.is_nil(r.stderr:find("unknown option", 1, true), opt .. ": " .. r.stderr)
      end
    end
  end)

  it("--version names luaretry's, libcurl's and Lua's versions and the features", function ()
    local r = proc.run({ "--version" })
    assert.are.equal(0, r.code)
    local lines = proc.lines(r.stdout)
    assert.matches("^luaretry %d+%.%d+%.%d+$", lines[1])
    assert.matches("^libcurl %d+%.%d+%.%d+", lines[2])
    assert.matches("^Lua 5%.4%.%d+$", lines[3])
    assert.matches("^features: .*https", lines[4])
    assert.matches("gzip", lines[4])
    assert.matches("^policies: ", lines[5])
    local v = proc.readfile(root .. "/core/include/luaretry.h"):match('#define LUARETRY_VERSION "([^"]+)"')
    assert.are.equal("luaretry " .. v, lines[1])
  end)
end)

describe("man pages", function ()
  it("mandoc -Tlint is clean on both", function ()
    -- from their folder, as make check-man runs it: each finds the page it names
    local out = proc.readfile_cmd("cd " .. q(root .. "/core/cli/man") ..
                                  " && env -u LD_PRELOAD mandoc -Tlint luaretry.1 luaretry-policy.5 2>&1; echo rc=$?")
    assert.are.equal("rc=0\n", out)
  end)

  it("luaretry-policy(5) names every field a script may set", function ()
    local man = proc.readfile(MAN5)
    for _, field in ipairs({ "name", "max_attempts", "deadline", "attempt_timeout", "backoff", "retry_after",
                             "max_retry_after", "body_limit", "budget", "breaker", "options",
                             "is_transient", "is_success", "is_idempotent", "prepare", "on_retry", "run" }) do
      assert.is_truthy(man:find(field, 1, true), field)
    end
  end)
end)

describe("completion", function ()
  it("bash: the commands, then options, then policy names from luaretry list", function ()
    local c = complete({ "luaretry", "" })
    for _, cmd in ipairs({ "run", "check", "simulate", "list", "faults", "demo", "help", "--version" }) do
      assert.is_true(c[cmd], cmd)
    end
    c = complete({ "luaretry", "run", "--ou" })
    assert.are.same({ ["--output"] = true, ["--output-dir"] = true }, c)
    c = complete({ "luaretry", "run", "g" })
    assert.is_true(c.gcs)
    c = complete({ "luaretry", "run", "-q", "azure" })
    assert.is_true(c["azure-batch"])
    c = complete({ "luaretry", "check", "http", "me" })
    assert.is_true(c.memorystore)
    c = complete({ "luaretry", "run", "-X", "P" })
    assert.are.same({ POST = true, PUT = true, PATCH = true }, c)
    c = complete({ "luaretry", "help", "si" })
    assert.are.same({ simulate = true }, c)
  end)

  it("zsh: the function parses and offers the same options of run", function ()
    assert.are.equal(0, proc.sh("env -u LD_PRELOAD zsh -n " .. q(ZSH)))
    local text = proc.readfile(ZSH)
    for _, opt in ipairs(run_options()) do
      if opt ~= "--help" and opt ~= "--data-ascii" then
        assert.is_truthy(text:find(opt, 1, true), opt .. " not in _luaretry")
      end
    end
    assert.matches("list %-%-names", text)
  end)
end)
