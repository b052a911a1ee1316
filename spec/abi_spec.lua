-- `make check-abi`: the ABI of libluaretry and libluaretry-curl against the
-- baseline in core/include/abi/, shown on a copy of the tree (its
-- libraries built at -O0) with changes planted in its public header: a
-- function added, an enum value appended (its name switch left short:
-- -Wno-switch) and a field carved from reserved
-- room pass; a struct that grows and a function removed fail, named.
local proc = require "support.proc"
local q = proc.q

-- The copy is built without the sanitizers (-O0, no LD_PRELOAD) in both
-- passes of `make test`: the sanitizer pass would build and compare the
-- same libraries again, a minute of both cores, for nothing new.
if proc.asan() then
  describe("make check-abi", function ()
    pending("run in the plain pass only (it builds the copy without the sanitizers)")
  end)
  return
end

describe("make check-abi", function ()
  local tree
  setup(function ()
    tree = proc.tmpdir()
    assert.are.equal(0, proc.sh("cd " .. q(proc.root) .. " && cp -r core Makefile lua policies " .. q(tree) ..
                                " && mkdir -p " .. q(tree .. "/spec") .. " && cp -r spec/tools " .. q(tree .. "/spec/")))
  end)
  teardown(function () if tree then proc.rmtree(tree) end end)

  -- `make check-abi` in the copy: exit status and what it said.
  local function check()
    local log = tree .. "/check.log"
    local code = proc.sh("cd " .. q(tree) .. " && env -u LD_PRELOAD -u MAKEFLAGS -u MFLAGS -u MAKELEVEL timeout 600 make -j2 " ..
                         "OPT='-O0 -g' CFLAGS=-Wno-switch check-abi >" .. q(log) .. " 2>&1")
    return code, proc.readfile(log) or ""
  end

  local header = "/core/include/luaretry.h"
  local original
  local function plant(edits)
    original = original or assert(proc.readfile(tree .. header))
    local s = original
    for _, e in ipairs(edits) do
      local a, b = s:find(e[1], 1, true)
      assert(a, "not in luaretry.h: " .. e[1])
      s = s:sub(1, a - 1) .. e[2] .. s:sub(b + 1)
    end
    proc.writefile(tree .. header, s)
  end

  -- The tree as it is passes: `make test` runs `make check-abi` on it.
  it("passes additions", function ()
    plant({
      { "  uint32_t retries;\n  uint32_t reserved_32;\n  uint64_t reserved[2];\n} luaretry_call_options;",
        "  uint32_t retries;\n  uint32_t reserved_32;\n  double planted;\n  uint64_t reserved[1];\n" ..
        "} luaretry_call_options;\n" ..
        "LUARETRY_API int luaretry_planted(void);" },
      { "  LUARETRY_E_FLEET ", "  LUARETRY_E_FLEET, LUARETRY_E_PLANTED " },
    })
    proc.writefile(tree .. "/core/engine/planted.c",
                   '#include "luaretry.h"\nint luaretry_planted(void) { return LUARETRY_E_PLANTED; }\n')
    local code, out = check()
    assert.are.equal(0, code, out)
    assert.matches("luaretry_planted", out)
    assert.matches("check%-abi: libluaretry: compatible with .* %(additions only%)", out)
    assert.matches("check%-abi: libluaretry%-curl: compatible", out)
  end)

  -- Both breaks in one build (each is a build of the whole copy): each is
  -- named on its own.
  it("fails on a struct that grows and on a function removed, naming each", function ()
    os.remove(tree .. "/core/engine/planted.c")
    proc.sh("rm -f " .. q(tree .. "/build/obj/engine/planted") .. ".*")
    plant({ { "  int throttled;", "  int throttled;\n  int planted_grows;" },
            { "LUARETRY_API const char *luaretry_lua_version(void);", "" } })
    -- gone from the header is not enough: gone from the library
    local lib = tree .. "/core/sandbox/sandbox_lib.c"
    local src = assert(proc.readfile(lib))
    local a, b = src:find("const char *luaretry_lua_version(void) { return LUA_RELEASE; }\n", 1, true)
    assert(a, "luaretry_lua_version's definition moved")
    proc.writefile(lib, src:sub(1, a - 1) .. src:sub(b + 1))
    local code, out = check()
    assert.are_not.equal(0, code, out)
    assert.matches("an incompatible change", out)
    assert.matches("struct luaretry_decision: type size changed from 832 to 896", out)
    assert.matches("1 Removed", out)
    assert.matches("luaretry_lua_version", out)
  end)
end)
