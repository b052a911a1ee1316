-- Every command's own standard output that cannot be written (a full disk,
-- a closed stream) is said, "luaretry: standard output: writing: WHY", and
-- is no success: exit 1 where the command would have exited 0 (luaretry(1),
-- EXIT STATUS), a worse status kept.  Before, `simulate --json`, `list`
-- and `help` exited 0 and `simulate` and `check` 3, all without a word.
-- The real build/luaretry (LUARETRY_BIN if set), its output to /dev/full.
local proc = require "support.proc"

local HTTP = proc.root .. "/policies/http.lua"

-- `luaretry ARGS >TARGET 2>FILE`: the exit status and what it said.
local function run_to(target, args)
  local dir = proc.tmpdir()
  local err = dir .. "/err"
  local words = {}
  for i, a in ipairs(args) do words[i] = proc.q(a) end
  local code = proc.sh("timeout -s KILL 60 " .. proc.q(proc.bin) .. " " .. table.concat(words, " ") ..
                       " </dev/null " .. target .. " 2>" .. proc.q(err))
  local said = proc.readfile(err) or ""
  proc.rmtree(dir)
  return code, said
end

local FULL = "luaretry: standard output: writing: No space left on device\n"

describe("standard output that cannot be written", function ()
  for _, args in ipairs({
    { "simulate", HTTP },
    { "simulate", HTTP, "--json" },
    { "simulate", HTTP, "--clients", "50" },
    { "simulate", HTTP, "--clients", "50", "--json" },
    { "simulate", HTTP, "--clients", "50", "--fleet" },
    { "simulate", HTTP, "--clients", "50", "--process", "--json" },
    { "simulate", HTTP, "--probe", "503", "--probe", "200" },
    { "check", HTTP },
    { "list" },
    { "list", "--names" },
    { "list", "--set-names" },
    { "help" },
    { "help", "run" },
    { "simulate", "--help" },
    { "--version" },
    { "run", "-s", "-w", "%{exitcode}\n", "--", "true" }, -- -w's line: its reason said too
  }) do
    local what = table.concat(args, " "):gsub(proc.root .. "/policies/", "")
    it(what .. ": said, exit 1", function ()
      local code, said = run_to(">/dev/full", args)
      assert.are.equal(1, code, said)
      assert.are.equal(FULL, said)
    end)
  end

  it("a closed standard output (>&-) too", function ()
    local code, said = run_to(">&-", { "check", HTTP })
    assert.are.equal(1, code, said)
    assert.are.equal("luaretry: standard output: writing: Bad file descriptor\n", said)
  end)

  it("a worse status stays, the write error said beside the policy's", function ()
    local dir = proc.tmpdir()
    local bad = dir .. "/bad.lua"
    proc.writefile(bad, "max_attempts = 3\ndeadline = 10\nattempt_timeout = 5\n" ..
                   'function is_transient(s) error("broke") end\n')
    local code, said = run_to(">/dev/full", { "check", bad })
    assert.are.equal(3, code, said)
    assert.are.equal(FULL, said)
    code, said = run_to(">/dev/full", { "simulate", bad })
    assert.are.equal(3, code, said)
    assert.matches("is_transient: " .. bad:gsub("%p", "%%%0") .. ":4: broke\n", said)
    assert.matches(FULL, said, 1, true)
    proc.rmtree(dir)
  end)

  it("output that can be written: exit 0, nothing said", function ()
    local code, said = run_to(">/dev/null", { "list" })
    assert.are.same({ 0, "" }, { code, said })
    code, said = run_to(">/dev/null", { "simulate", HTTP, "--json" })
    assert.are.same({ 0, "" }, { code, said })
  end)
end)
