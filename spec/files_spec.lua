-- Files as curl writes them: -o (and --output-dir, simulate --svg) create
-- 0666 less the umask, an existing file keeps its mode, a target that is
-- not a regular file (a device, a FIFO, "-") is written in place and never
-- replaced, a symlink is followed, and no ending signal leaves a
-- temporary file behind.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
local proc = require "support.proc"
local lfs = require "lfs"

local HTTP = proc.root .. "/policies/http.lua"
local FAST = { "--set", "backoff.initial=0.05", "--set", "backoff.jitter_max=0.05", "--seed", "1" }

-- Runs luaretry under `prefix` (shell words: a umask, a redirection);
-- {code, stdout, stderr}.
local function run_in(prefix, args, dir)
  local words = {}
  for _, a in ipairs(args) do words[#words + 1] = proc.q(a) end
  for _, a in ipairs(FAST) do words[#words + 1] = proc.q(a) end
  local out, err = dir .. "/.out", dir .. "/.err"
  local code = proc.sh("timeout -s KILL 30 sh -c " .. proc.q(prefix .. "; exec " .. proc.q(proc.bin) ..
                       " " .. table.concat(words, " ") .. " </dev/null >" .. proc.q(out) .. " 2>" ..
                       proc.q(err)))
  local r = { code = code, stdout = proc.readfile(out), stderr = proc.readfile(err) }
  os.remove(out)
  os.remove(err)
  return r
end

local function stat(path, fmt)
  return (proc.readfile_cmd("stat -c " .. proc.q(fmt) .. " " .. proc.q(path) .. " 2>/dev/null")
          :gsub("\n$", ""))
end

describe("files as curl writes them", function ()
  local srv, tmp
  proc.with_server(here .. "/fixtures/run/server.lua", function (s, t) srv, tmp = s, t end)

  local function url(path) return srv.base .. path end

  it("a new file is 0666 less the umask", function ()
    for mask, mode in pairs { ["022"] = "644", ["007"] = "660", ["077"] = "600" } do
      local out = tmp .. "/new-" .. mask
      local r = run_in("umask " .. mask, { "run", HTTP, url("/new"), "-o", out }, tmp)
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("new content\n", proc.readfile(out))
      assert.are.equal(mode, stat(out, "%a"))
    end
    local dir = tmp .. "/dir"
    proc.sh("mkdir " .. proc.q(dir))
    local r = run_in("umask 022", { "run", HTTP, url("/new"), url("/flaky"), "--output-dir", dir }, tmp)
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("644", stat(dir .. "/new", "%a"))
    assert.are.equal("644", stat(dir .. "/flaky", "%a"))
  end)

  it("an existing file keeps its mode", function ()
    for _, mode in ipairs { "600", "640", "664" } do
      local out = tmp .. "/old-" .. mode
      proc.writefile(out, "old\n")
      proc.sh("chmod " .. mode .. " " .. proc.q(out))
      local r = run_in("umask 022", { "run", HTTP, url("/new"), "-o", out }, tmp)
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("new content\n", proc.readfile(out))
      assert.are.equal(mode, stat(out, "%a"))
    end
    assert.are.same({}, proc.leftovers(tmp))
  end)

  it("a device node is written in place, never replaced (the -o /dev/null case)", function ()
    if proc.readfile_cmd("id -u") ~= "0\n" then
      pending("making a device node needs root")
      return
    end
    local null = tmp .. "/null"
    assert.are.equal(0, proc.sh("mknod -m 666 " .. proc.q(null) .. " c 1 3"))
    local r = run_in(":", { "run", HTTP, url("/flaky"), "-o", null }, tmp)
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("character special file", stat(null, "%F"))
    assert.are.equal("1,3", stat(null, "%Hr,%Lr"))
    assert.are.same({ "null" }, proc.ls(tmp))
  end)

  it("a FIFO is written in place: its reader gets the body, the FIFO stays", function ()
    local fifo, got = tmp .. "/fifo", tmp .. "/got"
    assert.are.equal(0, proc.sh("mkfifo " .. proc.q(fifo)))
    proc.sh("(timeout 20 cat " .. proc.q(fifo) .. " > " .. proc.q(got) .. ") >/dev/null 2>&1 &")
    local r = run_in(":", { "run", HTTP, url("/flaky"), "-o", fifo }, tmp)
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("fifo", stat(fifo, "%F"))
    assert.truthy(proc.wait_for(function () return proc.readfile(got) ~= "" and proc.readfile(got) end, 5))
    assert.are.equal("the 200 body\0with \r\n and \255\254 bytes\n", proc.readfile(got))
    assert.are.same({ "fifo", "got" }, proc.ls(tmp))
  end)

  it("a symlink is followed: it stays a link, its target gets the body and keeps its mode", function ()
    local real, link = tmp .. "/real.txt", tmp .. "/link.txt"
    proc.writefile(real, "old\n")
    proc.sh("chmod 640 " .. proc.q(real) .. "; ln -s real.txt " .. proc.q(link))
    local r = run_in("umask 022", { "run", HTTP, url("/new"), "-o", link }, tmp)
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("symbolic link", stat(link, "%F"))
    assert.are.equal("new content\n", proc.readfile(real))
    assert.are.equal("640", stat(real, "%a"))
    -- a dangling link names the file to make
    local dangling = tmp .. "/dangling"
    proc.sh("ln -s made.txt " .. proc.q(dangling))
    r = run_in("umask 022", { "run", HTTP, url("/new"), "-o", dangling }, tmp)
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("symbolic link", stat(dangling, "%F"))
    assert.are.equal("new content\n", proc.readfile(tmp .. "/made.txt"))
    assert.are.equal("644", stat(tmp .. "/made.txt", "%a"))
    assert.are.same({}, proc.leftovers(tmp))
  end)

  it("a symlink loop is an error before any request (as curl's open fails): the links stay", function ()
    local l1, l2 = tmp .. "/l1", tmp .. "/l2"
    proc.sh("ln -s l2 " .. proc.q(l1) .. "; ln -s l1 " .. proc.q(l2))
    local r = run_in(":", { "run", HTTP, url("/new"), "-o", l1 }, tmp)
    assert.are.equal(2, r.code, r.stderr)
    assert.matches("-o [^\n]*l1: Too many levels of symbolic links", r.stderr)
    assert.are.equal("symbolic link", stat(l1, "%F"))
    assert.are.equal("l2", proc.readfile_cmd("readlink " .. proc.q(l1)):gsub("\n$", ""))
    assert.are.same({ "l1", "l2" }, proc.ls(tmp))
    assert.are.equal(0, #srv:requests_on("/new"))
  end)

  it("-o - is standard output", function ()
    local r = run_in(":", { "run", HTTP, url("/new"), "-o", "-" }, tmp)
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("new content\n", r.stdout)
    assert.are.same({}, proc.ls(tmp))
  end)

  it("standard output: bodies below, at and above what it keeps in memory, after a retry", function ()
    local spill = proc.server(here .. "/fixtures/run/spill.lua")
    finally(function () spill:stop() end)
    for _, n in ipairs({ 0, 1, 65535, 65536, 65537, 1048576 }) do
      local r = run_in(":", { "run", HTTP, spill.base .. "/size/" .. n }, tmp)
      assert.are.equal(0, r.code, r.stderr)
      assert.matches("attempt 2/10: 200 %-> success", r.stderr)
      assert.are.equal(n, #r.stdout, "size " .. n)
      assert.are.equal(string.rep("0123456789abcdef", n // 16 + 1):sub(1, n), r.stdout)
    end
    assert.are.same({}, proc.ls(tmp))
  end)

  -- luaretry(1) TMPDIR: "luaretry: standard output: cannot create a
  -- temporary file: No such file or directory" named neither the folder
  -- nor TMPDIR.  A relative TMPDIR is taken from the current folder, as
  -- mktemp(1) and sort(1) take it (luaretry never changes folder)
  it("TMPDIR that cannot hold a body: said, naming the folder and TMPDIR; a relative one is used", function ()
    local spill = proc.server(here .. "/fixtures/run/spill.lua")
    finally(function () spill:stop() end)
    local bin = proc.bin:sub(1, 1) == "/" and proc.bin or os.getenv("PWD") .. "/" .. proc.bin
    local function in_tmp(tmpdir, args)
      local words = {}
      for _, a in ipairs(args) do words[#words + 1] = proc.q(a) end
      local cmd = "cd " .. proc.q(tmp) .. " && TMPDIR=" .. proc.q(tmpdir) .. " timeout -s KILL 30 " ..
                  proc.q(bin) .. " " .. table.concat(words, " ") .. " </dev/null >.out 2>.err"
      local r = { code = proc.sh(cmd), stdout = proc.readfile(tmp .. "/.out"), stderr = proc.readfile(tmp .. "/.err") }
      os.remove(tmp .. "/.out")
      os.remove(tmp .. "/.err")
      return r
    end
    local big = { "run", "http", spill.base .. "/size/100000", "-q" }
    local r = in_tmp(tmp .. "/none", big)
    assert.are.equal(1, r.code, r.stderr)
    assert.matches("^luaretry: standard output: cannot create a temporary file in " ..
                   (tmp .. "/none"):gsub("%p", "%%%0") .. " %(TMPDIR%): No such file or directory\n", r.stderr)
    r = in_tmp("spool", big)
    assert.are.equal(1, r.code, r.stderr)
    assert.matches("^luaretry: standard output: cannot create a temporary file in spool %(TMPDIR, relative to " ..
                   tmp:gsub("%p", "%%%0") .. "%): No such file or directory\n", r.stderr)
    -- a command's standard input, held for every attempt
    r = in_tmp("spool", { "run", "-q", "--", "true" })
    assert.are.equal(2, r.code, r.stderr)
    assert.matches("^luaretry: standard input: cannot create a temporary file in spool %(TMPDIR, relative to ", r.stderr)
    -- there, it holds the body (unlinked: nothing left)
    assert.is_true(lfs.mkdir(tmp .. "/spool"))
    r = in_tmp("spool", big)
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(100000, #r.stdout)
    assert.are.same({}, proc.ls(tmp .. "/spool"))
  end)

  it("simulate --svg through a symlink and onto a device node", function ()
    local real, link = tmp .. "/real.svg", tmp .. "/link.svg"
    proc.writefile(real, "")
    proc.sh("chmod 600 " .. proc.q(real) .. "; ln -s real.svg " .. proc.q(link))
    local r = proc.run({ "simulate", HTTP, "--clients", "50", "--seed", "1", "--svg", link },
                       { timeout = 30 })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("symbolic link", stat(link, "%F"))
    assert.matches("^<%?xml", proc.readfile(real))
    assert.are.equal("600", stat(real, "%a"))
    if proc.readfile_cmd("id -u") == "0\n" then
      local null = tmp .. "/null"
      proc.sh("mknod -m 666 " .. proc.q(null) .. " c 1 3")
      r = proc.run({ "simulate", HTTP, "--clients", "50", "--seed", "1", "--svg", null }, { timeout = 30 })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("character special file", stat(null, "%F"))
    end
    assert.are.same({}, proc.leftovers(tmp))
  end)

  for _, sig in ipairs { "HUP", "QUIT", "TERM", "INT" } do
    it("SIG" .. sig .. " during a wait leaves the old file and no temporary: exit 130", function ()
      local out = tmp .. "/out.txt"
      proc.writefile(out, "old\n")
      local job = proc.spawn({ "run", HTTP, url("/always503"), "--set", "backoff.initial=30",
                               "--seed", "1", "-o", out }, tmp)
      finally(function () job:stop() end)
      assert.truthy(proc.wait_for(function () return (job:stderr() or ""):find("retry in") end, 5))
      job:signal(sig)
      local code = job:wait(5)
      assert.are.equal(130, code)
      assert.are.equal("old\n", proc.readfile(out))
      assert.are.same({}, proc.leftovers(tmp))
    end)
  end

  it("a stop signal while -o FIFO waits for its reader ends the run: exit 130, no write error", function ()
    local fifo = tmp .. "/fifo"
    assert.are.equal(0, proc.sh("mkfifo " .. proc.q(fifo)))
    local job = proc.spawn({ "run", HTTP, url("/new"), "-o", fifo }, tmp)
    finally(function () job:stop() end)
    -- decided, then asleep: the open that waits for a reader
    assert.truthy(proc.wait_for(function () return (job:stderr() or ""):find("-> success", 1, true) end, 10))
    assert.truthy(job:blocked_on_pipe())
    job:signal("TERM")
    assert.are.equal(130, job:wait(5))
    assert.matches("luaretry: interrupted", job:stderr())
    assert.is_nil(job:stderr():find("Interrupted system call", 1, true))
  end)

  it("a stop signal while the body goes to a reader that stalls (a full pipe) ends the run: exit 130", function ()
    local spill = proc.server(here .. "/fixtures/run/spill.lua")
    local pidf, rcf, errf, readerf = tmp .. "/pid", tmp .. "/rc", tmp .. "/err", tmp .. "/reader"
    local pid, reader
    finally(function ()
      if pid and proc.alive(pid) then proc.kill(pid, 1) end
      reader = reader or tonumber(proc.readfile(readerf) or "")
      if reader and proc.alive(reader) then proc.kill(reader, 1) end
      spill:stop()
    end)
    -- a reader that never reads (30 s at most, stopped by its PID): 1 MiB
    -- fills the pipe, and the run blocks writing the body into it
    local run = "env -u LD_PRELOAD " .. proc.q(proc.bin) .. " run " .. proc.q(HTTP) .. " " ..
                proc.q(spill.base .. "/size/1048576") .. " " .. table.concat(FAST, " ") .. " 2>" .. proc.q(errf)
    local script = "(" .. run .. " & echo $! > " .. proc.q(pidf .. ".tmp") .. "; mv " .. proc.q(pidf .. ".tmp") ..
                   " " .. proc.q(pidf) .. "; wait $!; echo $? > " .. proc.q(rcf .. ".tmp") .. "; mv " ..
                   proc.q(rcf .. ".tmp") .. " " .. proc.q(rcf) .. ") | sh -c " ..
                   proc.q("echo $$ > " .. proc.q(readerf) .. "; exec sleep 30")
    proc.sh("sh -c " .. proc.q(script) .. " >/dev/null 2>&1 &")
    -- each wait ends at its event; 30 s, as beside 6 busy loops the shell
    -- took more than 5 s to start them (final112), the sanitized run more
    -- than 10 to decide (final107)
    -- a number: the reader's file is written by echo, seen empty first (final113)
    pid = proc.wait_for(function () return tonumber(proc.readfile(pidf) or "") end, 30)
    reader = proc.wait_for(function () return tonumber(proc.readfile(readerf) or "") end, 30)
    assert.truthy(pid and reader)
    -- decided, then asleep: nothing but the write to the full pipe is left
    assert.truthy(proc.wait_for(function ()
      return (proc.readfile(errf) or ""):find("-> success", 1, true) and proc.sleeps_on_pipe(pid)
    end, 30))
    proc.sh("kill -TERM " .. pid)
    local rc = proc.wait_for(function () return proc.readfile(rcf) end, 30)
    assert.are.equal("130\n", rc)
    assert.matches("luaretry: interrupted", proc.readfile(errf))
  end)

  it("SIGHUP in the middle of a body leaves no temporary", function ()
    local out = tmp .. "/out.bin"
    local job = proc.spawn({ "run", HTTP, url("/endless"), "-o", out }, tmp)
    finally(function () job:stop() end)
    assert.truthy(proc.wait_for(function () return #proc.leftovers(tmp) > 0 end, 5))
    job:signal("HUP")
    assert.are.equal(130, job:wait(5))
    assert.are.same({}, proc.leftovers(tmp))
    assert.is_nil(proc.readfile(out))
  end)
end)
