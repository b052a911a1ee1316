-- Bodies streamed, memory bounded: the curl helper keeps at most
-- body_limit bytes of a response for the script and streams the rest into
-- the output (rewound for each attempt), so a server streaming an endless
-- 200 body cannot grow luaretry's memory, only its output file, until the
-- deadline.  (Resident memory is asserted in the normal build only: ASan's
-- quarantine inflates it.)
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
local proc = require "support.proc"

local HTTP = proc.root .. "/policies/http.lua"
local MiB = 1024 * 1024

describe("an endless 200 body", function ()
  local srv, tmp
  setup(function () srv = proc.server(here .. "/fixtures/run/server.lua") end)
  teardown(function () if srv then srv:stop() end end)
  before_each(function () tmp = proc.tmpdir() end)
  after_each(function () proc.rmtree(tmp) end)

  local function endless(more)
    local args = { "run", HTTP, srv.base .. "/endless-paced", "--set", "deadline=3", "--seed", "1" }
    for _, a in ipairs(more) do args[#args + 1] = a end
    local job = proc.spawn(args, tmp)
    local peak = proc.watch_rss(job, 20)
    local code, ended = job:wait(5)
    job:stop()
    return code, peak, job
  end

  it("with -o FILE: exit 5 at the deadline, memory flat, the old file kept, no temporary", function ()
    local out = tmp .. "/out.bin"
    proc.writefile(out, "old\n")
    local code, peak, job = endless({ "-o", out })
    assert.are.equal(5, code, job:stderr())
    assert.matches("attempt 1/10: timeout error %-> deadline", job:stderr())
    assert.are.equal("old\n", proc.readfile(out))
    assert.are.same({}, proc.leftovers(tmp))
    if not proc.asan() then
      assert.is_true(peak < 64 * MiB, ("peak RSS %.1f MiB"):format(peak / MiB))
    end
  end)

  it("to standard output: exit 5 at the deadline, memory flat, the bytes spooled", function ()
    local code, peak, job = endless({})
    assert.are.equal(5, code, job:stderr())
    -- what the final attempt received is shown, as curl shows it: far more
    -- than the process ever held, however fast a busy machine streams it
    -- (a fixed 64 MiB raced the 3 s deadline: 57 MiB came beside 6 busy
    -- loops, final98, against about 150 MiB idle)
    local size = tonumber(proc.readfile_cmd("stat -c %s " .. proc.q(tmp .. "/job.out")))
    assert.is_true(size > 16 * MiB, "only " .. size .. " bytes came")
    if not proc.asan() then
      assert.is_true(peak < 64 * MiB, ("peak RSS %.1f MiB"):format(peak / MiB))
      assert.is_true(size > 2 * peak, ("%.1f MiB came, peak RSS %.1f MiB"):format(size / MiB, peak / MiB))
    end
  end)

  -- `luaretry ARGS` with TMPDIR a 40 MiB file system of its own (a tmpfs in
  -- a mount namespace, root only, gone with the namespace), until its
  -- stderr says `word` (20 s at most): then what that file system holds,
  -- and SIGTERM.  `wrap` goes before the run (strace), which is then its
  -- child, signalled by its own PID.  Its stderr, the bytes used there,
  -- its exit status and the mount point; nil without root.
  local function in_small_fs(args, word, wrap)
    local q, mnt = proc.q, tmp .. "/small"
    proc.sh("mkdir " .. q(mnt))
    if proc.sh("unshare -m sh -c " .. q("mount -t tmpfs -o size=1m tmpfs " .. q(mnt)) .. " >/dev/null 2>&1") ~= 0 then
      return nil
    end
    wrap = wrap or ""
    local err, used, rc = tmp .. "/err", tmp .. "/used", tmp .. "/rc"
    local words = {}
    for i, a in ipairs(args) do words[i] = q(a) end
    local script = table.concat({
      "mount -t tmpfs -o size=40m tmpfs " .. q(mnt),
      "TMPDIR=" .. q(mnt) .. " env -u LD_PRELOAD " .. wrap .. q(proc.bin) .. " " .. table.concat(words, " ") ..
        " >/dev/null 2>" .. q(err) .. " & p=$!",
      "i=0; while ! grep -q " .. q(word) .. " " .. q(err) .. " && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done",
      "df -B1 --output=used " .. q(mnt) .. " | tail -1 > " .. q(used),
      "r=$p; [ -z " .. q(wrap) .. " ] || r=$(env -u LD_PRELOAD pgrep -P $p)",
      "kill -TERM $r; wait $p; echo $? > " .. q(rc) }, "\n")
    proc.sh("timeout -s KILL 60 unshare -m sh -c " .. q(script) .. " >/dev/null 2>&1")
    return proc.readfile(err) or "", proc.readfile(used) or "", proc.readfile(rc), mnt
  end

  -- what was refused left nothing held once it was said, and nothing failed
  local function space_back(said, used, rc)
    assert.is_nil(said:find("No space left", 1, true), said)
    assert.is_true((tonumber(used) or math.huge) < MiB, "the spool's space is held: " .. used)
    assert.are.equal("130\n", rc)
  end

  local NO_ROOT = "a file system of the run's own needs root (unshare -m, mount)"

  -- held until the call ends in $TMPDIR, the body filled that file system
  -- until the deadline (24 GB at the default 300 s), every other write
  -- there failing meanwhile
  it("to standard output: the spool never takes its file system's last 5%, and gives its space back at once", function ()
    -- "at once" means by the time it is said: each ftruncate held back
    -- 1 s (strace, on every new machine) makes a message said before the
    -- space is back show it held, every time, not once in a busy run
    -- (final24)
    local slow = proc.sh("command -v strace >/dev/null") == 0
      and "strace -f -qq -o /dev/null --seccomp-bpf -e trace=ftruncate -e inject=ftruncate:delay_enter=1000000 "
      or ""
    local said, used, rc, mnt = in_small_fs({ "run", HTTP, srv.base .. "/endless", "--set", "deadline=30",
                                              "--seed", "1" }, "is not kept", slow)
    if not said then return pending(NO_ROOT) end
    assert.matches("luaretry: standard output: the body is not kept: held in " .. mnt:gsub("%p", "%%%0") ..
                   " until the call ends, it passed %d+ MiB, and more would leave that file system less than 5%% free",
                   said)
    space_back(said, used, rc)
  end)

  -- luaretry(1): a batch's body that ends before those ahead of it waits
  -- in one more file in TMPDIR, "bound the same way".  Its spool was
  -- copied in whole and the room looked at after: a 26 MiB body in a 40
  -- MiB TMPDIR filled it ("writing: No space left on device").  Here the
  -- URL ahead never answers, so the 26 MiB always wait.
  it("a batch's body waiting for its turn never takes its file system's last 5%, said once its space is back", function ()
    local list = tmp .. "/urls"
    proc.writefile(list, srv.base .. "/hang\n" .. srv.base .. "/26mib\n")
    local said, used, rc, mnt = in_small_fs({ "run", HTTP, "--urls", list, "-Z", "--set", "deadline=60",
                                              "--seed", "1" }, "waiting for its turn")
    if not said then return pending(NO_ROOT) end
    assert.matches("luaretry: %[2%] standard output: the body is not kept: waiting for its turn in " ..
                   mnt:gsub("%p", "%%%0") .. ", it would leave that file system less than 5%% free", said)
    space_back(said, used, rc)
  end)
end)
