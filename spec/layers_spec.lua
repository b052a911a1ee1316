-- `make check-layers` (spec/tools/check_layers.lua): the tree passes, and a
-- copy of it broken on purpose fails, naming the file, the line and why.
local proc = require "support.proc"
local q = proc.q

local CHECK = proc.root .. "/spec/tools/check_layers.lua"

local function check(core, objects)
  local out = os.tmpname()
  local code = proc.sh("lua5.4 " .. q(CHECK) .. " " .. q(core) .. " " ..
                       table.concat(objects or {}, " ") .. " >" .. q(out) .. " 2>&1")
  local text = proc.readfile(out)
  os.remove(out)
  return code, text
end

-- A copy of core/ with `text` appended to file `rel` (or a new file).
local function broken_copy(rel, text)
  local dir = proc.tmpdir()
  assert(proc.sh("cp -r " .. q(proc.root .. "/core") .. " " .. q(dir .. "/core")) == 0)
  local path = dir .. "/core/" .. rel
  local old = proc.readfile(path) or ""
  proc.writefile(path, old .. text)
  local lines = select(2, old:gsub("\n", "")) + 1
  return dir, dir .. "/core", lines
end

describe("check-layers", function ()
  it("passes on the tree as it is", function ()
    local code, text = check(proc.root .. "/core")
    assert.are.equal(0, code, text)
    assert.matches("every include within its layer", text)
  end)

  local cases = {
    { "engine/clock.c", "#include <lua.h>\n", "engine may not include Lua's lua.h" },
    { "engine/call.c", "#include <curl/curl.h>\n", "engine may not include libcurl's curl/curl.h" },
    { "engine/rng.c", '#include "policy/policy.h"\n', "engine may not include policy's" },
    { "sandbox/sandbox.c", '#include "policy/policy.h"\n', "sandbox may not include policy's" },
    { "sandbox/lpattern.c", '#include "fleet/fleet.h"\n', "sandbox may not include fleet's" },
    { "faults/server.c", '#include "policy/policy.h"\n', "faults may not include policy's" },
    { "http/perform.c", '#include "engine/engine.h"\n', "http may not include engine's" },
    { "module/lmodule.c", '#include "sandbox/sandbox.h"\n', "module may not include sandbox's" },
    { "cli/main.c", '#include "engine/engine.h"\n', "cli may not include engine's" },
    { "cli/run/run.c", "#include <lauxlib.h>\n", "cli may not include Lua's lauxlib.h" },
    { "include/luaretry.h", "#include <curl/curl.h>\n", "may not include libcurl's" },
    { "policy/judge.c", '#include "nowhere.h"\n', "is not in the folder nor in include/" },
    { "policy/policy.c", "#include <hiredis.h>\n", "policy may not include hiredis's hiredis.h" },
    { "engine/guard.c", '#include "fleet/fleet.h"\n', "engine may not include fleet's" },
  }
  for _, c in ipairs(cases) do
    it("fails on " .. c[2]:gsub("\n", "") .. " in " .. c[1], function ()
      local dir, core, line = broken_copy(c[1], c[2])
      finally(function () proc.rmtree(dir) end)
      local code, text = check(core)
      assert.are.equal(1, code, text)
      assert.truthy(text:find(("%s:%d: "):format(c[1], line), 1, true), text)
      assert.truthy(text:find(c[3], 1, true), text)
    end)
  end

  -- Each {name, source} compiled into obj/SUB/name.o of a folder removed
  -- when the test ends: the objects, in order.
  local function objects(sub, sources)
    local dir = proc.tmpdir()
    finally(function () proc.rmtree(dir) end)
    assert.are.equal(0, proc.sh("mkdir -p " .. q(dir .. "/obj/" .. sub)))
    local objs = {}
    for i, src in ipairs(sources) do
      local c, o = dir .. "/" .. src[1] .. ".c", dir .. "/obj/" .. sub .. "/" .. src[1] .. ".o"
      proc.writefile(c, src[2])
      assert.are.equal(0, proc.sh("cc -c " .. q(c) .. " -o " .. q(o)))
      objs[i] = o
    end
    return objs
  end

  it("fails on a loop between two files, and names it", function ()
    local objs = objects("x", { { "a", "int b(void);\nint a(void) { return b(); }\n" },
                                { "b", "int a(void);\nint b(void) { return a(); }\n" },
                                { "c", "int a(void);\nint c(void) { return a(); }\n" } })
    local code, text = check(proc.root .. "/core", objs)
    assert.are.equal(1, code, text)
    assert.matches("a loop between files: x/a %-> x/b %-> x/a", text)
    -- without b, the rest has no loop: c -> a is a plain dependency
    code, text = check(proc.root .. "/core", { objs[1], objs[3] })
    assert.are.equal(0, code, text)
  end)

  it("fails on a guard of the chain that calls another guard, and names both", function ()
    local objs = objects("engine", {
      { "guard_a", "int b(void);\nint a(void) { return b(); }\n" },
      { "guard_b", "int b(void) { return 1; }\n" },
      { "chain", "int a(void);\nint b(void);\nint c(void) { return a() + b(); }\n" } })
    local code, text = check(proc.root .. "/core", objs)
    assert.are.equal(1, code, text)
    assert.matches("the guards' unit: engine/guard_a uses engine/guard_b %(b%)", text)
    -- the chain asking both is no breach
    code, text = check(proc.root .. "/core", { objs[2], objs[3] })
    assert.are.equal(0, code, text)
  end)
end)

describe("the shared library", function ()
  -- Each library's public functions, under the version node LUARETRY_1.0
  -- (the node itself is listed too); the command's luaretry_tool.h
  -- functions stay hidden.
  local function exports(lib)
    local build = proc.bin:match("^(.*)/[^/]*$")
    local p = assert(io.popen("nm -D --defined-only " .. q(build .. "/" .. lib) .. " 2>&1"))
    local names, others = {}, {}
    for line in p:lines() do
      local sym = line:match("%s(%S+)$")
      local name, node = sym:match("^(luaretry_[%w_]+)@@(.*)$")
      if name and node == "LUARETRY_1.0" then
        names[#names + 1] = name
      elseif sym ~= "LUARETRY_1.0" then
        others[#others + 1] = sym
      end
    end
    p:close()
    return names, others
  end

  it("exports only luaretry_* symbols, versioned, and is named with its full version", function ()
    local build = proc.bin:match("^(.*)/[^/]*$")
    local names, others = exports("libluaretry.so")
    assert.is_true(#names > 40, "nm listed " .. #names .. " symbols")
    assert.are.same({}, others)
    local set = {}
    for _, n in ipairs(names) do set[n] = true end
    assert.is_true(set.luaretry_call_begin)
    assert.is_nil(set.luaretry_simulate_herd)      -- luaretry_tool.h's
    assert.is_nil(set.luaretry_curl_perform)       -- libluaretry-curl's
    local curl_names, curl_others = exports("libluaretry-curl.so")
    assert.are.same({}, curl_others)
    for _, n in ipairs(curl_names) do assert.matches("^luaretry_curl_", n) end
    local h = assert(proc.readfile(proc.root .. "/core/include/luaretry.h"))
    local v = table.concat({ h:match("LUARETRY_VERSION_MAJOR (%d+)"),
                             h:match("LUARETRY_VERSION_MINOR (%d+)"),
                             h:match("LUARETRY_VERSION_PATCH (%d+)") }, ".")
    for _, lib in ipairs({ "libluaretry", "libluaretry-curl" }) do
      assert.truthy(io.open(build .. "/" .. lib .. ".so." .. v), "no " .. lib .. ".so." .. v)
      local soname = io.popen("objdump -p " .. q(build .. "/" .. lib .. ".so") .. " | grep SONAME"):read("a")
      assert.matches(lib:gsub("%-", "%%-") .. "%.so%." .. h:match("LUARETRY_VERSION_MAJOR (%d+)") .. "\n", soname)
    end
  end)

  -- A host that loads the module and links libluaretry.so must not get two
  -- copies of the library (and two watchdog threads) through interposition.
  it("the Lua module beside it exports luaopen_luaretry only", function ()
    local build = proc.bin:match("^(.*)/[^/]*$")
    local p = assert(io.popen("nm -D --defined-only " .. q(build .. "/luaretry.so") .. " 2>&1"))
    local exported = {}
    for line in p:lines() do
      local kind, sym = line:match("%s(%a)%s(%S+)$")
      if kind and kind:match("[TDBR]") then exported[#exported + 1] = sym end
    end
    p:close()
    assert.are.same({ "luaopen_luaretry" }, exported)
  end)
end)

-- make check-format: clang-format with the tree's .clang-format, as make
-- test runs it, passes the tree's files and fails on one that drifts.
describe("check-format", function ()
  it("passes a file of the tree and fails on the same file drifted", function ()
    local dir = proc.tmpdir()
    finally(function () proc.rmtree(dir) end)
    assert(proc.sh("cp " .. q(proc.root .. "/.clang-format") .. " " .. q(proc.root .. "/core/engine/rng.c") ..
                   " " .. q(dir)) == 0)
    local check = "cd " .. q(dir) .. " && clang-format --dry-run --Werror rng.c 2>/dev/null"
    assert.are.equal(0, proc.sh(check))
    local text = proc.readfile(dir .. "/rng.c")
    proc.writefile(dir .. "/rng.c", (text:gsub("%) {\n", ")\n{\n", 1)))  -- a brace on its own line
    assert.are_not.equal(0, proc.sh(check))
  end)
end)

-- make test ends comparing `git status` with its start (tree-before,
-- tree-after): a file a spec leaves behind fails it, build/ does not.
describe("the tree after make test", function ()
  it("tree-after fails on a file left behind, names it, and passes once it is gone", function ()
    local dir = proc.tmpdir()
    finally(function () proc.rmtree(dir) end)
    local root = proc.root:sub(1, 1) == "/" and proc.root or os.getenv("PWD") .. "/" .. proc.root
    local make = "cd " .. q(dir) .. " && make -s -f " .. q(root .. "/Makefile") .. " "
    assert(proc.sh("cd " .. q(dir) .. " && git init -q . && echo a > a && git add a && " ..
                   "git -c user.email=s@x -c user.name=s commit -qm a") == 0)
    local before = proc.readfile_cmd(make .. "tree-before 2>&1; echo \"exit $?\"")
    assert.matches("exit 0", before)
    proc.writefile(dir .. "/left.tmp", "x")
    proc.writefile(dir .. "/build/ignored", "x")
    local out = proc.readfile_cmd(make .. "tree-after 2>/dev/null; echo \"exit $?\"")
    assert.matches("%?%? left%.tmp", out)
    assert.is_nil(out:find("build/", 1, true), out)
    assert.matches("exit [^0]", out)
    os.remove(dir .. "/left.tmp")
    assert.are.equal(0, proc.sh(make .. "tree-after >/dev/null 2>&1"))
  end)
end)
