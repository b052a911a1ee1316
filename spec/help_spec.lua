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

-- luaretry(1) as a reader sees it (mandoc's text, overstrikes removed).
local function man_text(path)
  return proc.readfile_cmd("env -u LD_PRELOAD mandoc -Tascii " .. q(path) .. " | col -bx")
end

-- Whether opt stands in text as a word of its own ("--set" is not found
-- in "--settings", "-d" not in "-d@").
local function has_word(text, word)
  -- a word that ends in punctuation (-#) ends where it ends
  local tail = word:find("[%w%-]$") and "%f[^%w%-]" or ""
  local pat = "%f[%w%-]" .. word:gsub("%p", "%%%0") .. tail
  return text:find(pat) ~= nil
end

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
    local dir = proc.tmpdir()
    finally(function () proc.rmtree(dir) end)
    local bin = proc.readfile_cmd("realpath " .. q(proc.bin)):gsub("\n$", "")
    local function in_dir(args)
      local words = {}
      for i, a in ipairs(args) do words[i] = q(a) end
      local code = proc.sh("cd " .. q(dir) .. " && timeout -s KILL 60 " .. q(bin) .. " " ..
                           table.concat(words, " ") .. " </dev/null >/dev/null 2>.err")
      local r = { code = code, stderr = proc.readfile(dir .. "/.err") or "" }
      os.remove(dir .. "/.err")
      os.remove(dir .. "/1") -- not read by the next option (-K 1)
      return r
    end
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
        -- taken: whatever else fails, it is not an unknown option (one
        -- attempt: -6 or --retry-all-errors would retry what they reach).
        -- In a folder of its own: a run that stops on its usage error
        -- still writes --metrics-file and --log-json, here a file "1"
        local r = in_dir({ "run", "http", "--set", "max_attempts=1", opt, "1" })
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
  it("mandoc -Tlint is clean on every page, and there are the four", function ()
    -- from their folder, as make check-man runs it: each finds the page it names
    local dir = q(root .. "/core/cli/man")
    local pages = proc.readfile_cmd("cd " .. dir .. " && LC_ALL=C ls *.[1-9]")
    assert.are.equal("libluaretry.3\nluaretry-faults.5\nluaretry-policy.5\nluaretry.1\n", pages)
    local out = proc.readfile_cmd("cd " .. dir .. " && env -u LD_PRELOAD mandoc -Tlint *.[1-9] 2>&1; echo rc=$?")
    assert.are.equal("rc=0\n", out)
  end)

  it("luaretry(1) renders as written: no word taken for a flag ('(--calls, default 1000)')", function ()
    local man = man_text(MAN1):gsub("%s+", " ")
    assert.is_truthy(man:find("(--calls, default 1000)", 1, true))
    assert.is_nil(man:find("-default", 1, true))
    -- (a macro's name in a quote: its No was a call, and vanished)
    assert.is_truthy(man:find("writing: No space left on device", 1, true))
  end)

  -- On a macro line, a word that is also the name of a callable mdoc
  -- macro is a call: in `.Pq Ql writing: No space left` the quote's No
  -- switched the font and vanished ("writing: space left").  Where the
  -- last macro before it only quotes text (Ql, Dq, Pq...), such a word can
  -- only have been meant as a word: it must be written \&No.  (After Fl,
  -- Va or Ic, No is the deliberate switch back to plain text.)
  it("no page has a word a quote's macro takes for a call (No, An, At, In, Do unescaped)", function ()
    local QUOTES = { Ql = true, Dq = true, Qq = true, Sq = true, Pq = true, Bq = true, Brq = true, Aq = true }
    local WORDS = { No = true, An = true, At = true, In = true, Do = true }
    -- the callable macros a quote's text can meet (mdoc(7)'s "callable")
    local CALLABLE = {}
    for m in ([[Ac Ad An Ao Ap Aq Ar At Bc Bo Bq Brc Bro Brq Bsx Bx Cd Cm Dc Do Dq Dv Dx Ec Em En Eo Er
                Es Ev Fa Fc Fl Fn Fo Fr Fx Ic In Li Lk Ms Nm No Ns Nx Oc Oo Op Ot Ox Pa Pc Pf Po Pq Qc
                Ql Qo Qq Sc So Sq Sx Sy Ta Tn Ux Va Vt Xc Xo Xr]]):gmatch("%S+") do
      CALLABLE[m] = true
    end
    local eaten = {}
    for _, page in ipairs({ "luaretry.1", "luaretry-policy.5", "luaretry-faults.5", "libluaretry.3" }) do
      local n = 0
      for line in io.lines(root .. "/core/cli/man/" .. page) do
        n = n + 1
        if line:match("^%.%a") then
          local last = line:match("^%.(%S+)")
          for word in line:gsub("^%.%S+", ""):gmatch("%S+") do
            if WORDS[word] and QUOTES[last] then eaten[#eaten + 1] = page .. ":" .. n .. ": " .. line end
            if CALLABLE[word] then last = word end
          end
        end
      end
    end
    assert.are.same({}, eaten)
  end)

  it("luaretry-policy(5) names every field of the schema table, and libluaretry(3) the host's", function ()
    -- the rows of core/policy/schema.h: X(ID, "name", TYPE, lo, hi, FLAGS, ...)
    local schema = assert(proc.readfile(root .. "/core/policy/schema.h"))
    local man, lib = man_text(MAN5), man_text(root .. "/core/cli/man/libluaretry.3")
    local n, missing = 0, {}
    for name, flags in schema:gmatch('X%(%u[%u_]*, "([%w_.]+)", T_%u+, [^,]+, [^,]+, ([^,]+),') do
      n = n + 1
      local host = flags:find("HOST", 1, true)
      -- a table's field by its own name (the page lists it under its table)
      local word = host and name or name:match("[^.]+$")
      if not has_word(man, word) then missing[#missing + 1] = "luaretry-policy(5): " .. name end
      if host and not has_word(lib, name) then missing[#missing + 1] = "libluaretry(3): " .. name end
    end
    assert.is_true(n >= 40, "schema rows read: " .. n)
    assert.are.same({}, missing)
  end)

  it("libluaretry(3) names every function and method of the Lua module", function ()
    -- the module's own registration tables (core/module/lmodule.c)
    local src = assert(proc.readfile(root .. "/core/module/lmodule.c"))
    local lib = man_text(root .. "/core/cli/man/libluaretry.3")
    local missing, n = {}, 0
    for tab, prefix in pairs({ policy_methods = "p:", call_methods = "c:", functions = "luaretry." }) do
      local body = assert(src:match("static const luaL_Reg " .. tab .. "%[%] = {(.-)};"), tab)
      for name in body:gmatch('{ "([%w_]+)",') do
        n = n + 1
        if not lib:find(prefix .. name, 1, true) then missing[#missing + 1] = prefix .. name end
      end
    end
    assert.is_true(n >= 25, "registrations read: " .. n)
    table.sort(missing)
    assert.are.same({}, missing)
  end)

  it("luaretry-policy(5) renders its quotes under mandoc and groff", function ()
    for _, cmd in ipairs({ "mandoc -Tutf8", "groff -man -Tutf8" }) do
      local text = proc.readfile_cmd("env -u LD_PRELOAD " .. cmd .. " " .. q(MAN5) .. " 2>&1 | col -bx")
      assert.matches('"exponential" %(default', text, nil, cmd)
      assert.matches('"none", "additive" %(default', text, nil, cmd)
      assert.is_nil(text:find('""', 1, true), cmd)
    end
  end)
end)

describe("completion", function ()
  it("--set NAME=: bash and zsh complete the schema's settable names (luaretry list --set-names)", function ()
    local names = proc.run({ "list", "--set-names" }).stdout
    -- every settable row of core/policy/schema.h, read here as help_spec reads it above
    local schema = assert(proc.readfile(root .. "/core/policy/schema.h"))
    local n = 0
    for name, ty, flags in schema:gmatch('X%(%u[%u_]*, "([%w_.]+)", T_(%u+), [^,]+, [^,]+, ([^,]+),') do
      local settable = ty ~= "FUNCTION" and ty ~= "TABLE" and ty ~= "BACKOFF" -- schema.c's rule
      if settable and not flags:find("HOST", 1, true) then
        n = n + 1
        assert.is_truthy(names:find("\n" .. name:gsub("%p", "%%%0") .. "=\n") or
                         names:find("^" .. name:gsub("%p", "%%%0") .. "=\n"), name)
      end
    end
    assert.is_true(n >= 20, "settable rows read: " .. n)
    local c = complete({ "luaretry", "run", "--set", "backoff.ini" })
    assert.are.same({ ["backoff.initial="] = true }, c)
    c = complete({ "luaretry", "check", "http", "--set", "max_a" })
    assert.are.same({ ["max_attempts="] = true }, c)
    local zsh = proc.readfile(ZSH)
    assert.is_truthy(zsh:find("list --set-names", 1, true))
    for line in zsh:gmatch("[^\n]*%-%-set%[[^\n]*") do
      assert.is_truthy(line:find(":_luaretry_set_names", 1, true), line)
    end
  end)

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
    c = complete({ "luaretry", "fleet", "--redis", "redis://h/0", "g" })
    assert.is_true(c.gcs)
    c = complete({ "luaretry", "help", "si" })
    assert.are.same({ simulate = true }, c)
    -- --checksum takes ALG=HEX, as zsh offers it: no policy name, no file
    -- (it offered both); nor is the word after it taken for POLICY
    c = complete({ "luaretry", "run", "--checksum", "" })
    assert.are.same({ ["sha-256="] = true, ["sha-512="] = true, ["md5="] = true }, c)
    c = complete({ "luaretry", "run", "--checksum", "sha" })
    assert.are.same({ ["sha-256="] = true, ["sha-512="] = true }, c)
    c = complete({ "luaretry", "run", "--checksum", "md5=00", "g" })
    assert.is_true(c.gcs)
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

-- What the program accepts, read from its own sources: the commands main()
-- dispatches, run's option table (core/cli/run/args.c), the option strings
-- the other commands' parsers compare against, and the environment
-- variables the command and the library read.  A new option or variable
-- appears here by itself; the spec below then wants it documented.
local function source(path) return assert(proc.readfile(root .. "/core/" .. path), path) end

local function accepted()
  local commands = {}
  for c in source("cli/main.c"):gmatch('strcmp%(cmd, "(%l+)"%)') do
    if c ~= "help" then commands[#commands + 1] = c end
  end
  local options = { run = {} }
  local tab = assert(source("cli/run/args.c"):match("OPTIONS%[%] = {(.-)\n};"), "no OPTIONS table")
  for short, long in tab:gmatch("{ ([^,]+), \"(%-%-[%w=-]+)\", O_") do
    options.run[#options.run + 1] = long
    local c = short:match("^'(.)'$")
    if c then options.run[#options.run + 1] = "-" .. c end
  end
  local parsers = { check = source("cli/check.c"), simulate = source("cli/simulate/simulate.c"),
                    list = source("cli/list.c"), fleet = source("cli/fleet_cmd.c"),
                    faults = assert(source("cli/main.c"):match("static int cmd_faults(.-)\n}\n")) }
  for cmd, text in pairs(parsers) do
    local seen, t = {}, {}
    for opt in text:gmatch('"(%-%-[%w][%w=-]*)"') do
      if not seen[opt] and opt ~= "--help" then seen[opt] = true; t[#t + 1] = opt end
    end
    options[cmd] = t
  end
  local env, seen = {}, { HOME = true, TMPDIR = true }   -- the system's own
  for _, dir in ipairs({ "cli", "cli/run", "cli/simulate", "sandbox", "policy", "faults" }) do
    local p = io.popen("ls " .. q(root .. "/core/" .. dir) .. "/*.c")
    for f in p:lines() do
      for name in proc.readfile(f):gmatch('getenv%("([%w_]+)"%)') do
        if not seen[name] then seen[name] = true; env[#env + 1] = name end
      end
    end
    p:close()
  end
  return commands, options, env
end

-- The branch of zsh's `case $cmd in` for one command.
local function zsh_branch(text, cmd)
  return text:match("\n    " .. cmd .. "%)(.-);;") or ""
end

describe("every command, option and environment variable the program accepts", function ()
  local commands, options, env = accepted()

  it("is read from the sources (the reader itself works)", function ()
    assert.is_true(#commands >= 7)
    assert.is_true(#options.run >= 50)
    assert.is_truthy(has_word(table.concat(options.fleet, " "), "--redis"))
    assert.is_truthy(has_word(table.concat(options.faults, " "), "--listen-any"))
    assert.is_truthy(has_word(table.concat(env, " "), "LUARETRY_REDIS"))
    assert.is_false(has_word("--settings", "--set"))
  end)

  it("is in luaretry(1)", function ()
    local man = man_text(MAN1)
    local missing = {}
    for _, cmd in ipairs(commands) do
      if not man:find("\n     " .. cmd .. " ", 1, true) and not man:find("\n     " .. cmd .. "\n", 1, true) then
        missing[#missing + 1] = "command " .. cmd
      end
    end
    for cmd, list in pairs(options) do
      for _, opt in ipairs(list) do
        if not has_word(man, opt) then missing[#missing + 1] = cmd .. " " .. opt end
      end
    end
    local envsec = man:match("\nENVIRONMENT\n(.-)\n%u") or ""
    for _, name in ipairs(env) do
      if not has_word(envsec, name) then missing[#missing + 1] = "environment " .. name end
    end
    table.sort(missing)
    assert.are.same({}, missing)
  end)

  it("is in luaretry help and help COMMAND", function ()
    local overview = proc.run({ "help" }).stdout
    local missing = {}
    for _, cmd in ipairs(commands) do
      if not overview:find("\n  " .. cmd .. " ", 1, true) then missing[#missing + 1] = "command " .. cmd end
      local text = proc.run({ "help", cmd }).stdout
      for _, opt in ipairs(options[cmd] or {}) do
        if not has_word(text, opt) then missing[#missing + 1] = "help " .. cmd .. ": " .. opt end
      end
    end
    for _, name in ipairs(env) do
      if not has_word(overview, name) then missing[#missing + 1] = "environment " .. name end
    end
    table.sort(missing)
    assert.are.same({}, missing)
  end)

  it("is completed by bash and zsh", function ()
    local zsh = proc.readfile(ZSH)
    local missing = {}
    local top = complete({ "luaretry", "" })
    for _, cmd in ipairs(commands) do
      if not top[cmd] then missing[#missing + 1] = "bash: command " .. cmd end
      if not zsh:find("\n    '" .. cmd .. ":", 1, true) then missing[#missing + 1] = "zsh: command " .. cmd end
      local offered = complete({ "luaretry", cmd, "-" })
      local branch = zsh_branch(zsh, cmd)
      for _, opt in ipairs(options[cmd] or {}) do
        if not offered[opt] then missing[#missing + 1] = "bash: " .. cmd .. " " .. opt end
        if not branch:find(opt, 1, true) then missing[#missing + 1] = "zsh: " .. cmd .. " " .. opt end
      end
    end
    table.sort(missing)
    assert.are.same({}, missing)
  end)
end)
