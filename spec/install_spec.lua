-- `make install PREFIX=<tmp>`, then README.md's "Embedding in C" example
-- compiled through pkg-config against the installed library and run
-- against the real fault server.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
local proc = require "support.proc"
local q = proc.q


-- The EXAMPLES of a man page (mdoc source): each `.Bd -literal` block and
-- each `.Dl` line, unescaped as the reader sees them, in order.
local function man_examples(path)
  local text = assert(proc.readfile(path))
  local section = assert(text:match("\n%.Sh EXAMPLES\n(.-)\n%.Sh "), "no EXAMPLES in " .. path)
  local function unescape(s)
    return (s:gsub("\\%(dq", '"'):gsub("\\&", ""):gsub("\\%-", "-"):gsub("\\e", "\\"))
  end
  local list = {}
  local pos = 1
  while true do
    local a, b = section:find("%.Bd %-literal[^\n]*\n", pos)
    local c = section:find("\n%.Dl ", pos) or section:find("^%.Dl ", pos)
    if c and (not a or c < a) then
      local line = section:match("%.Dl ([^\n]*)", c)
      list[#list + 1] = unescape(line)
      pos = c + 4
    elseif a then
      local e = assert(section:find("\n%.Ed", b, false), "unclosed .Bd in " .. path)
      list[#list + 1] = unescape(section:sub(b + 1, e))
      pos = e + 3
    else
      break
    end
  end
  return list
end

local BODY200 = "the 200 body\0with \r\n and \255\254 bytes\n"  -- spec/fixtures/run/server.lua /flaky

-- make install and luarocks build in the tree (build/install, build/rock):
-- once, in the plain pass; `make test` runs the sanitizer pass beside it,
-- and the two would build into the same folders at once.
if proc.asan() then
  describe("make install", function ()
    pending("run in the plain pass only (it builds plain programs into build/install)")
  end)
  return
end

describe("make install", function ()
  it("installs a library that README's C example builds against and runs with", function ()
    local prefix = proc.tmpdir()
    local srv
    finally(function ()
      if srv then srv:stop() end
      proc.rmtree(prefix)
    end)
    local log = prefix .. "/make.log"
    -- a first install (build/install made afresh) after `make`: of build/'s
    -- objects, same flags, only the two that hold the prefix are compiled
    local make = "cd " .. q(proc.root) .. " && env -u LD_PRELOAD -u MAKEFLAGS -u MFLAGS -u MAKELEVEL timeout 300 make "
    assert.are.equal(0, proc.sh(make .. "-j2 all >" .. q(log) .. " 2>&1"), proc.readfile(log))
    assert.are.equal(0, proc.sh("rm -rf " .. q(proc.root .. "/build/install"))) -- (rmtree keeps to /tmp)
    local code = proc.sh(make .. "install PREFIX=" .. q(prefix) .. " >" .. q(log) .. " 2>&1")
    assert.are.equal(0, code, proc.readfile(log))
    local made, compiled = proc.readfile(log), {}
    for obj in made:gmatch(" %-c core/[%w_/]+%.c %-o (%S+)") do compiled[#compiled + 1] = obj end
    table.sort(compiled)
    assert.are.same({ "build/install/obj/cli/main.o", "build/install/obj/sandbox/find.o" }, compiled, made)
    for _, f in ipairs({ "/include/luaretry.h", "/include/luaretry_curl.h", "/lib/libluaretry.a",
                         "/lib/libluaretry.so", "/lib/pkgconfig/luaretry.pc", "/bin/luaretry",
                         "/lib/libluaretry-curl.a", "/lib/libluaretry-curl.so", "/lib/pkgconfig/luaretry-curl.pc",
                         "/share/luaretry/policies/http.lua", "/share/luaretry/lua/retry.lua" }) do
      assert.is_truthy(io.open(prefix .. f), "not installed: " .. f)
    end

    -- README.md's C example, exactly as documented
    local readme = assert(proc.readfile(proc.root .. "/README.md"))
    local section = assert(readme:match("\n## Embedding in C\n(.*)"), "no Embedding in C section")
    local source = assert(section:match("```c\n(.-)```"), "no ```c block in Embedding in C")
    assert.matches("retry_get%.c", source)
    proc.writefile(prefix .. "/retry_get.c", source)
    local pc = "PKG_CONFIG_PATH=" .. q(prefix .. "/lib/pkgconfig") .. " pkg-config"
    local cc = "cd " .. q(prefix) .. " && env -u LD_PRELOAD cc -Wall -Wextra -Werror retry_get.c $(" .. pc .. " --cflags --libs luaretry-curl)" ..
               " -Wl,-rpath," .. q(prefix .. "/lib") .. " -o retry_get >cc.log 2>&1"
    assert.are.equal(0, proc.sh(cc), proc.readfile(prefix .. "/cc.log"))

    -- a short policy beside it; require reaches the installed lua/ helpers
    proc.writefile(prefix .. "/fast.lua", [[
name = "fast"
max_attempts = 5
deadline = 30
backoff = { initial = 0.05, jitter = "none" }
local retry = require "retry"
local transient = retry.status_in { 500, 502, 503, 504 }
function is_transient(status, body, info) return status == 0 or transient(status) end
]])
    srv = proc.server(here .. "/fixtures/run/server.lua")
    local r = proc.run({ prefix .. "/fast.lua", srv.base .. "/flaky" },
                       { bin = prefix .. "/retry_get", timeout = 30, plain = true })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(BODY200, r.stdout)   -- the final body only: two 503s were retried
    assert.are.equal(3, #srv:requests_on("/flaky"))

    -- the installed command finds the installed policies and helpers
    srv:reset()
    r = proc.run({ "run", prefix .. "/share/luaretry/policies/http.lua", srv.base .. "/new", "-q" },
                 { bin = prefix .. "/bin/luaretry", timeout = 30, plain = true })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("new content\n", r.stdout)
  end)

  -- Everything below runs with an environment of PATH, LD_LIBRARY_PATH,
  -- LUA_CPATH and LUA_PATH only, as README.md's "Install" section says.
  local function only_env(prefix)
    return "env -i PATH=" .. q(prefix .. "/bin:/usr/bin:/bin") ..
           " LD_LIBRARY_PATH=" .. q(prefix .. "/lib") ..
           " LUA_CPATH=" .. q(prefix .. "/lib/lua/5.4/?.so;;") ..
           " LUA_PATH=" .. q(prefix .. "/share/luaretry/lua/?.lua;;") .. " "
  end

  -- "file" and "dir" lines of a find(1) listing of root, sorted.
  local function tree(root)
    local t = {}
    local p = io.popen("cd " .. q(root) .. " && find . -mindepth 1 | sort")
    for line in p:lines() do t[#t + 1] = line end
    p:close()
    return t
  end

  it("into an empty folder: the command, list, man, pkg-config, a C program and the Lua module; uninstall empties it", function ()
    local prefix = proc.tmpdir()
    local srv
    finally(function ()
      if srv then srv:stop() end
      proc.rmtree(prefix)
    end)
    local log = prefix .. ".log"
    local make = "cd " .. q(proc.root) .. " && env -u LD_PRELOAD -u MAKEFLAGS -u MFLAGS -u MAKELEVEL timeout 300 make "
    assert.are.equal(0, proc.sh(make .. "install PREFIX=" .. q(prefix) .. " >" .. q(log) .. " 2>&1"),
                     proc.readfile(log))
    for _, f in ipairs({ "/lib/libluaretry.so.0.2.0", "/lib/libluaretry.so.0", "/lib/lua/5.4/luaretry.so",
                         "/share/man/man1/luaretry.1", "/share/man/man5/luaretry-policy.5",
                         "/share/bash-completion/completions/luaretry", "/share/zsh/site-functions/_luaretry",
                         "/share/doc/luaretry/LICENSE", "/share/luaretry/install-manifest" }) do
      assert.is_truthy(io.open(prefix .. f), "not installed: " .. f)
    end
    assert.are.equal("libluaretry.so.0.2.0", proc.readfile_cmd("readlink " .. q(prefix .. "/lib/libluaretry.so.0")):gsub("\n", ""))
    local env = only_env(prefix)
    local out = prefix .. "/out"
    local function sh(cmd) return proc.sh("cd " .. q(prefix) .. " && " .. env .. cmd .. " >" .. q(out) .. " 2>&1") end

    srv = proc.server(here .. "/fixtures/run/server.lua")
    -- the policy by its name, found in the installed share/luaretry/policies
    assert.are.equal(0, sh("luaretry run http " .. q(srv.base .. "/new") .. " -q"), proc.readfile(out))
    assert.are.equal("new content\n", proc.readfile(out))
    assert.are.equal(0, sh("luaretry list"), proc.readfile(out))
    assert.matches("^" .. prefix:gsub("%p", "%%%0") .. "/share/luaretry/policies:\n  azure ", proc.readfile(out))
    assert.are.equal(0, sh("man -P cat luaretry"), proc.readfile(out))
    assert.matches("retry HTTP requests and commands", proc.readfile(out))
    assert.are.equal(0, sh("man -P cat 5 luaretry-policy"), proc.readfile(out))
    local pkg = "pkg-config --with-path=" .. q(prefix .. "/lib/pkgconfig")
    assert.are.equal(0, sh(pkg .. " --libs luaretry"))
    assert.matches("%-L" .. prefix:gsub("%p", "%%%0") .. "/lib %-lluaretry", proc.readfile(out))
    -- a host of the engine alone links Lua, hiredis (the fleet's client) and libcrypto, not libcurl
    assert.is_nil(proc.readfile(out):find("curl"))
    assert.are.equal(0, sh(pkg .. " --static --libs luaretry"))
    assert.matches("%-llua5%.4", proc.readfile(out))
    assert.matches("%-lhiredis", proc.readfile(out))
    assert.matches("%-lcrypto", proc.readfile(out))  -- the fleet's script SHA1s
    assert.is_nil(proc.readfile(out):find("curl"))
    assert.are.equal(0, sh(pkg .. " --libs luaretry-curl"))
    assert.matches("%-lluaretry%-curl", proc.readfile(out))
    assert.matches("%-lcurl", proc.readfile(out))
    proc.writefile(prefix .. "/engine_host.c", assert(proc.readfile(proc.root .. "/spec/c/engine_host.c")))
    assert.are.equal(0, sh("cc -Wall -Wextra -Werror engine_host.c $(" .. pkg .. " --cflags --libs luaretry)" ..
                           " -o engine_host"), proc.readfile(out))
    assert.are.equal(0, sh("./engine_host"), proc.readfile(out))
    assert.matches("attempt 2: 200 %-> success", proc.readfile(out))
    assert.are.equal(0, sh("ldd ./engine_host"), proc.readfile(out))
    local ldd = proc.readfile(out)
    assert.matches("libluaretry%.so%.0 => " .. prefix:gsub("%p", "%%%0"), ldd)
    assert.matches("liblua5%.4", ldd)
    assert.is_nil(ldd:find("curl"), ldd)
    -- README's C example, linked against the shared library, found through LD_LIBRARY_PATH
    local readme = assert(proc.readfile(proc.root .. "/README.md"))
    proc.writefile(prefix .. "/retry_get.c", readme:match("\n## Embedding in C\n.-```c\n(.-)```"))
    assert.are.equal(0, sh("cc -Wall -Wextra -Werror retry_get.c $(pkg-config --with-path=" .. q(prefix .. "/lib/pkgconfig") ..
                           " --cflags --libs luaretry-curl) -o retry_get"), proc.readfile(out))
    assert.are.equal(0, sh("./retry_get http " .. q(srv.base .. "/new")), proc.readfile(out))  -- by name
    assert.matches("new content", proc.readfile(out))
    -- stock lua5.4 finds the module, and the helpers through LUA_PATH
    assert.are.equal(0, sh("lua5.4 -e " .. q('local l = require "luaretry"; assert(l.load("gcs")); ' ..
                                             'assert(require "testing"); print("loaded")')), proc.readfile(out))
    assert.are.equal("loaded\n", proc.readfile(out))

    os.remove(prefix .. "/retry_get.c")
    os.remove(prefix .. "/retry_get")
    os.remove(prefix .. "/engine_host")
    os.remove(prefix .. "/engine_host.c")
    os.remove(out)
    assert.are.equal(0, proc.sh(make .. "uninstall PREFIX=" .. q(prefix) .. " >" .. q(log) .. " 2>&1"),
                     proc.readfile(log))
    assert.are.same({}, tree(prefix))
    os.remove(log)
  end)

  it("with DESTDIR: everything under DESTDIR/PREFIX and nothing else; uninstall takes only what it put", function ()
    local dest, prefix = proc.tmpdir(), proc.tmpdir()
    finally(function ()
      proc.rmtree(dest)
      proc.rmtree(prefix)
    end)
    -- the prefix holds something of its own, which must outlive the uninstall
    proc.sh("mkdir -p " .. q(dest .. prefix .. "/bin"))
    proc.writefile(dest .. prefix .. "/bin/other", "#!/bin/sh\n")
    local before = tree(dest)
    local log = dest .. ".log"
    local make = "cd " .. q(proc.root) .. " && env -u LD_PRELOAD -u MAKEFLAGS -u MFLAGS -u MAKELEVEL timeout 300 make "
    local vars = " DESTDIR=" .. q(dest) .. " PREFIX=" .. q(prefix)
    assert.are.equal(0, proc.sh(make .. "install" .. vars .. " >" .. q(log) .. " 2>&1"), proc.readfile(log))
    assert.are.same({}, tree(prefix))  -- nothing lands in the real prefix
    for _, path in ipairs(tree(dest)) do
      local abs = path:sub(2)  -- "./tmp/x/bin" -> "/tmp/x/bin"
      local above = prefix:sub(1, #abs) == abs and (#abs == #prefix or prefix:sub(#abs + 1, #abs + 1) == "/")
      local under = abs:sub(1, #prefix + 1) == prefix .. "/"
      assert.is_true(above or under, "outside DESTDIR/PREFIX: " .. path)
    end
    -- the files name PREFIX, never DESTDIR
    assert.matches("prefix=" .. prefix:gsub("%p", "%%%0") .. "\n",
                   proc.readfile(dest .. prefix .. "/lib/pkgconfig/luaretry.pc"))
    assert.is_nil(proc.readfile(dest .. prefix .. "/lib/pkgconfig/luaretry.pc"):find(dest, 1, true))
    -- a package manager moves the staged tree into place: it runs there as it is
    proc.sh("cp -a " .. q(dest .. prefix) .. "/. " .. q(prefix))
    local out = prefix .. "/../" .. "out"
    assert.are.equal(0, proc.sh(only_env(prefix) .. "luaretry list >" .. q(out) .. " 2>&1"), proc.readfile(out))
    assert.matches("\n  gcs +Google Cloud Storage%.\n", proc.readfile(out))
    os.remove(out)
    assert.are.equal(0, proc.sh(make .. "uninstall" .. vars .. " >" .. q(log) .. " 2>&1"), proc.readfile(log))
    assert.are.same(before, tree(dest))
    os.remove(log)
  end)

  -- core/install/install.sh itself, on the build in build/ (what `make
  -- install` runs after building for the prefix): code, its output
  local function install_sh(action, prefix)
    local h = proc.readfile(proc.root .. "/core/include/luaretry.h")
    local v = {}
    for _, part in ipairs({ "MAJOR", "MINOR", "PATCH" }) do
      v[#v + 1] = h:match("#define LUARETRY_VERSION_" .. part .. " (%d+)")
    end
    local log = prefix .. ".log"
    local code = proc.sh("cd " .. q(proc.root) .. " && env -u LD_PRELOAD DESTDIR= PREFIX=" .. q(prefix) ..
                         " BUILD=" .. q(proc.bin:match("^(.*)/[^/]*$")) .. " VERSION=" .. table.concat(v, ".") ..
                         " MAJOR=" .. v[1] .. " sh core/install/install.sh " .. action .. " >" .. q(log) .. " 2>&1")
    local out = proc.readfile(log)
    os.remove(log)
    return code, out
  end

  it("uninstall follows its manifest only under the prefix: outside, '..', behind a link or not a file is refused", function ()
    local prefix, outside = proc.tmpdir(), proc.tmpdir()
    finally(function ()
      proc.rmtree(prefix)
      proc.rmtree(outside)
    end)
    local code, out = install_sh("install", prefix)
    assert.are.equal(0, code, out)
    -- what must outlive the uninstall: a file outside, a file of the
    -- prefix's owner, a folder and a FIFO the manifest is edited to name
    proc.writefile(outside .. "/victim", "keep me\n")
    proc.writefile(prefix .. "/mine", "keep me too\n")
    proc.sh("mkdir " .. q(prefix .. "/somedir") .. " && mkfifo " .. q(prefix .. "/fifo"))
    proc.writefile(prefix .. "/somedir/inner", "kept\n")
    proc.sh("ln -s " .. q(outside) .. " " .. q(prefix .. "/elsewhere"))
    local rel = ("../"):rep(select(2, prefix:gsub("/", ""))) .. outside:sub(2) .. "/victim"
    local manifest = prefix .. "/share/luaretry/install-manifest"
    local f = assert(io.open(manifest, "a"))
    f:write("file " .. outside .. "/victim\n", "file " .. rel .. "\n", "file bin/../mine\n",
            "file elsewhere/victim\n", "file somedir\n", "file fifo\n", "dir elsewhere\n",
            "dir ../" .. outside:match("[^/]*$") .. "\n")
    f:close()
    code, out = install_sh("uninstall", prefix)
    assert.are.equal(1, code, out)
    assert.matches("uninstall: " .. outside:gsub("%p", "%%%0") .. "/victim in the manifest is absolute", out)
    assert.matches("uninstall: bin/%.%./mine in the manifest has '%.%.'", out)
    assert.matches("elsewhere/victim in the manifest lies behind the symbolic link", out)
    assert.matches("somedir is neither a regular file nor a link: refused", out)
    assert.matches("fifo is neither a regular file nor a link: refused", out)
    assert.matches("7 line%(s%) of the manifest refused; everything else removed", out)
    assert.are.equal("keep me\n", proc.readfile(outside .. "/victim"))
    assert.are.equal("keep me too\n", proc.readfile(prefix .. "/mine"))
    assert.are.equal("kept\n", proc.readfile(prefix .. "/somedir/inner"))
    assert.is_nil(io.open(prefix .. "/bin/luaretry"))  -- the rest went
    assert.is_nil(io.open(manifest))
    assert.are.same({ "./elsewhere", "./fifo", "./mine", "./somedir", "./somedir/inner" }, tree(prefix))
  end)

  it("install never writes through a symbolic link it did not make", function ()
    local prefix, outside = proc.tmpdir(), proc.tmpdir()
    finally(function ()
      proc.rmtree(prefix)
      proc.rmtree(outside)
    end)
    -- share/luaretry linking elsewhere
    proc.sh("mkdir " .. q(prefix .. "/share") .. " && ln -s " .. q(outside) .. " " .. q(prefix .. "/share/luaretry"))
    local code, out = install_sh("install", prefix)
    assert.are.equal(1, code, out)
    assert.matches("share/luaretry is a symbolic link %(to " .. outside:gsub("%p", "%%%0") ..
                   "%) this install did not make: refusing to write through it", out)
    assert.are.same({}, tree(outside))
    -- a link where a file goes (bin/luaretry to someone's file)
    proc.sh("rm " .. q(prefix .. "/share/luaretry") .. " && mkdir -p " .. q(prefix .. "/bin"))
    proc.writefile(outside .. "/tool", "someone's tool\n")
    proc.sh("ln -s " .. q(outside .. "/tool") .. " " .. q(prefix .. "/bin/luaretry"))
    code, out = install_sh("install", prefix)
    assert.are.equal(1, code, out)
    assert.matches("bin/luaretry is a symbolic link %(to .*%) this install did not make", out)
    assert.are.equal("someone's tool\n", proc.readfile(outside .. "/tool"))
    -- a folder where a file goes: not written into
    proc.sh("rm " .. q(prefix .. "/bin/luaretry") .. " && mkdir " .. q(prefix .. "/bin/luaretry"))
    code, out = install_sh("install", prefix)
    assert.are.equal(1, code, out)
    assert.matches("bin/luaretry is a folder, where a file goes: refusing to write into it", out)
    assert.are.same({}, proc.ls(prefix .. "/bin/luaretry"))
    -- a link the install made (lib/libluaretry.so) is replaced, never
    -- followed: a second install over the first goes through
    proc.sh("rmdir " .. q(prefix .. "/bin/luaretry"))
    code, out = install_sh("install", prefix)
    assert.are.equal(0, code, out)
    code, out = install_sh("install", prefix)
    assert.are.equal(0, code, out)
    code, out = install_sh("uninstall", prefix)
    assert.are.equal(0, code, out)
    assert.are.same({ "./bin", "./share" }, tree(prefix))  -- the folders that were there before
  end)

  it("luarocks --lua-version=5.4 make --tree DIR builds and installs a module stock lua5.4 loads", function ()
    local dir = proc.tmpdir()
    finally(function () proc.rmtree(dir) end)
    local log = dir .. "/rock.log"
    local code = proc.sh("cd " .. q(proc.root) .. " && env -u LD_PRELOAD -u MAKEFLAGS -u MFLAGS -u MAKELEVEL timeout 300 luarocks --lua-version=5.4 make --tree " ..
                         q(dir .. "/tree") .. " lua/luaretry-0.2.0-1.rockspec >" .. q(log) .. " 2>&1")
    assert.are.equal(0, code, proc.readfile(log))
    local lua = "env -i PATH=/usr/bin:/bin LUA_CPATH=" .. q(dir .. "/tree/lib/lua/5.4/?.so;;") .. " lua5.4 -e "
    -- a policy by name, and a script requiring the helpers installed with the rock
    local script = 'local l = require "luaretry"; local p = assert(l.load("http")); ' ..
                   'assert(l.load_string("max_attempts = 2; local r = require [[retry]]")); print(p:tuning().name)'
    local r = proc.readfile_cmd(lua .. q(script) .. " 2>&1")
    assert.are.equal("http\n", r)
  end)
  it("runs every example of the man pages, and README's Lua ones, from the installed prefix, C ones built with -Werror", function ()
    local prefix, work = proc.tmpdir(), proc.tmpdir()
    finally(function ()
      proc.rmtree(prefix)
      proc.rmtree(work)
    end)
    local log = work .. "/make.log"
    assert.are.equal(0, proc.sh("cd " .. q(proc.root) .. " && env -u LD_PRELOAD -u MAKEFLAGS -u MFLAGS -u MAKELEVEL " ..
                                "timeout 300 make install PREFIX=" .. q(prefix) .. " >" .. q(log) .. " 2>&1"),
                     proc.readfile(log))
    for _, f in ipairs({ "man1/luaretry.1", "man3/libluaretry.3", "man5/luaretry-policy.5", "man5/luaretry-faults.5" }) do
      assert.is_truthy(io.open(prefix .. "/share/man/" .. f), "not installed: " .. f)
    end
    for _, f in ipairs({ "examples/idempotency-key.lua", "examples/iam-set-policy.lua", "faults/flaky.lua",
                         "faults/routes.lua" }) do
      assert.is_truthy(io.open(prefix .. "/share/luaretry/" .. f), "not installed: " .. f)
    end
    -- a port the examples' 8399 stands for: one the system just gave out
    local srv = proc.server(proc.root .. "/policies/faults/flaky.lua")
    local port = tostring(srv.port)
    srv:stop()
    local env = "env -i PATH=" .. q(prefix .. "/bin:/usr/bin:/bin") ..
                " LD_LIBRARY_PATH=" .. q(prefix .. "/lib") ..
                " LUA_CPATH=" .. q(prefix .. "/lib/lua/5.4/?.so;;") ..
                " LUA_PATH=" .. q(prefix .. "/share/luaretry/lua/?.lua;;") ..
                " PKG_CONFIG_PATH=" .. q(prefix .. "/lib/pkgconfig") .. " "
    local ran = 0
    for _, page in ipairs({ "luaretry.1", "luaretry-policy.5", "luaretry-faults.5", "libluaretry.3" }) do
      for i, example in ipairs(man_examples(proc.root .. "/core/cli/man/" .. page)) do
        local where = page .. " example " .. i
        example = example:gsub("/usr/local", (prefix:gsub("%%", "%%%%"))):gsub("8399", port)
        local name = example:match("^/%* ([%w_]+%.c):")
        local script
        if name then   -- a C source: written where the next example builds it
          proc.writefile(work .. "/" .. name, example)
        else
          -- a server an example started and a failure left behind is stopped
          script = "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" .. example
          proc.writefile(work .. "/example.sh", script)
          local out = work .. "/example.out"
          local code = proc.sh("cd " .. q(work) .. " && " .. env .. "timeout 120 sh -e example.sh >" ..
                               q(out) .. " 2>&1")
          assert.are.equal(0, code, where .. ":\n" .. example .. "\n" .. (proc.readfile(out) or ""))
          ran = ran + 1
        end
      end
    end
    assert.is_true(ran >= 11, "examples run: " .. ran)

    -- README's Lua module example, and its policy with its spec under busted
    local readme = assert(proc.readfile(proc.root .. "/README.md"))
    local function block(first)
      local b = readme:match("```%w*\n(" .. first:gsub("%p", "%%%0") .. ".-)```")
      return assert(b, "README has no block starting " .. first)
    end
    local out = work .. "/readme.out"
    proc.writefile(work .. "/module.lua", block("local luaretry = require \"luaretry\""))
    assert.are.equal(0, proc.sh("cd " .. q(work) .. " && " .. env .. "lua5.4 module.lua >" .. q(out) .. " 2>&1"),
                     proc.readfile(out))
    assert.matches("exhausted\t3\n$", proc.readfile(out))
    proc.writefile(work .. "/orders.lua", block("-- orders.lua: our orders service"))
    proc.writefile(work .. "/orders_spec.lua", block("-- orders_spec.lua"))
    assert.are.equal(0, proc.sh("cd " .. q(work) .. " && " .. env .. "busted --lua=lua5.4 -o plainTerminal " ..
                                "orders_spec.lua >" .. q(out) .. " 2>&1"), proc.readfile(out))
    assert.matches(" 0 failures / 0 errors", proc.readfile(out))
  end)

end)
