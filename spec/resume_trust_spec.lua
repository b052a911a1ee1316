-- Resumed downloads (issue 30, review): an earlier run's partial is
-- continued only when this user made it, and an error answer to a Range
-- request (a load balancer's 503) never throws away the bytes held.
-- Against `luaretry faults` (spec/fixtures/downloads/resume_trust.lua).
local proc = require "support.proc"
local dl = require "support.downloads"

local run, partial, sidecar, plant = proc.run_http, dl.partial, dl.sidecar, dl.plant
-- The server's 20000-byte `file`.
local WHOLE = dl.content(20000)

-- got is want, byte for byte (the message gives lengths, not the bytes)
local function same_bytes(want, got, what)
  assert.are.equal(#want, got and #got, (what or "") .. ": length")
  assert.is_true(want == got, (what or "") .. ": bytes differ")
end

local count = require("support.text").count

local function mode(path)
  return proc.readfile_cmd("stat -c %a " .. proc.q(path)):match("%d+")
end
local function chmod(m, path)
  assert(proc.sh("chmod " .. m .. " " .. proc.q(path)) == 0)
end

describe("resumed downloads", function ()
  local srv, tmp
  proc.with_server(proc.root .. "/spec/fixtures/downloads/resume_trust.lua",
                   function (s, t) srv, tmp = s, t end)
  local function file_bytes() return dl.file_bytes(srv) end
  local function ranges(path) return dl.ranges(srv, path) end

  describe("an earlier run's partial is continued only when this user made it", function ()
    -- each case: a partial that would fit (the server's first 5000 bytes,
    -- the right URL and ETag), which must not be continued nor touched
    local function refused(out, url, why, planted)
      local r = run({ url, "-o", out })
      assert.are.equal(0, r.code, r.stderr)
      same_bytes(WHOLE, proc.readfile(out))
      local seen = ranges("/whole")
      assert.are.equal(1, #seen)
      assert.is_false(seen[1].range)  -- from zero: no byte of it used
      assert.are.equal(20000, file_bytes())
      -- said once, naming the file and why
      assert.are.equal(1, count(r.stderr, "not continued"), r.stderr)
      assert.matches(partial(out):gsub("%p", "%%%0") .. "[^\n]*not continued[^\n]*" .. why, r.stderr)
      -- left as it was: never appended to, never renamed into place
      same_bytes(planted, proc.readfile(partial(out)), "the planted partial")
      assert.are.equal(sidecar(url, '"w"'), proc.readfile(partial(out) .. ".url"))
      assert.are.same({ "." .. out:match("[^/]*$") .. ".luaretry-partial",
                        "." .. out:match("[^/]*$") .. ".luaretry-partial.url" }, proc.leftovers(tmp))
    end

    it("one writable by group or others (mode 0666) is not continued", function ()
      local out, url = tmp .. "/g.bin", srv.base .. "/whole"
      plant(out, WHOLE:sub(1, 5000), url, '"w"')
      chmod("666", partial(out))
      refused(out, url, "writable by group or others", WHOLE:sub(1, 5000))
      assert.are.equal("666", mode(partial(out)))
    end)

    it("nor one whose .url file is writable by others", function ()
      local out, url = tmp .. "/s.bin", srv.base .. "/whole"
      plant(out, WHOLE:sub(1, 5000), url, '"w"')
      chmod("622", partial(out) .. ".url")
      refused(out, url, "writable by group or others", WHOLE:sub(1, 5000))
    end)

    it("nor one with another name (a hard link: appending would change that file)", function ()
      local out, url = tmp .. "/l.bin", srv.base .. "/whole"
      local notes = tmp .. "/notes"
      proc.writefile(notes, WHOLE:sub(1, 5000))
      chmod("600", notes)
      assert.are.equal(0, proc.sh("ln " .. proc.q(notes) .. " " .. proc.q(partial(out))))
      proc.writefile(partial(out) .. ".url", sidecar(url, '"w"'))
      chmod("600", partial(out) .. ".url")
      refused(out, url, "other name", WHOLE:sub(1, 5000))
      same_bytes(WHOLE:sub(1, 5000), proc.readfile(notes))
    end)

    it("nor one owned by another user (run as root: the files given to nobody)", function ()
      if proc.readfile_cmd("id -u"):match("%d+") ~= "0" then
        pending("needs root to give a file to another user")
        return
      end
      local out, url = tmp .. "/o.bin", srv.base .. "/whole"
      plant(out, WHOLE:sub(1, 5000), url, '"w"')
      chmod("644", partial(out))
      chmod("644", partial(out) .. ".url")
      assert.are.equal(0, proc.sh("chown nobody " .. proc.q(partial(out)) .. " " ..
                                  proc.q(partial(out) .. ".url")))
      refused(out, url, "owned by another user", WHOLE:sub(1, 5000))
    end)

    it("one this user made is continued (the same check passes it)", function ()
      local out, url = tmp .. "/m.bin", srv.base .. "/whole"
      plant(out, WHOLE:sub(1, 5000), url, '"w"')
      local r = run({ url, "-o", out })
      assert.are.equal(0, r.code, r.stderr)
      same_bytes(WHOLE, proc.readfile(out))
      assert.are.same({ { range = "bytes=5000-", if_range = '"w"' } }, ranges("/whole"))
      assert.are.equal(15000, file_bytes())
      assert.is_nil(r.stderr:find("not continued", 1, true))
      assert.are.same({}, proc.leftovers(tmp))
    end)

    it("the .url file is written through no link planted at its temporary name", function ()
      local out, url = tmp .. "/k.bin", srv.base .. "/slow"
      local precious = tmp .. "/precious"
      proc.writefile(precious, "mine\n")
      assert.are.equal(0, proc.sh("ln -s " .. proc.q(precious) .. " " ..
                                  proc.q(partial(out) .. ".url.tmp")))
      -- stopped once some bytes are in (the temporary grows), long before the end
      local jobdir = proc.tmpdir()
      local job = proc.spawn({ "run", "http", url, "-o", out }, jobdir)
      finally(function () job:stop(); proc.rmtree(jobdir) end)
      assert.is_true(dl.grown(tmp, "k.bin", 20), "no bytes came")
      job:signal("TERM")
      assert.are.equal(130, job:wait(20), job:stderr())
      assert.are.equal("mine\n", proc.readfile(precious))
      local held = proc.readfile(partial(out))
      assert.is_truthy(held)
      assert.are.equal(sidecar(url, '"r1"'), proc.readfile(partial(out) .. ".url"))
      assert.are.equal("600", mode(partial(out) .. ".url"))
      -- and the next run continues it
      local r = run({ url, "-o", out })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(("0123456789"):rep(10), proc.readfile(out))
      local seen = ranges("/slow")
      assert.are.equal(("bytes=%d-"):format(#held), seen[#seen].range)
    end)
  end)

  describe("an error answer to a Range request keeps the bytes held", function ()
    it("a partial from run 1, run 2 answered 503 then 206: only the rest is fetched", function ()
      local out, url = tmp .. "/b.bin", srv.base .. "/busy-once"
      plant(out, WHOLE:sub(1, 6000), url, '"w"')
      local r = run({ url, "-o", out })
      assert.are.equal(0, r.code, r.stderr)
      assert.matches("attempt 1/10: 503 %-> retry", r.stderr)
      same_bytes(WHOLE, proc.readfile(out))
      -- the same Range both times, and 14000 bytes of the file sent in all
      assert.are.same({ { range = "bytes=6000-", if_range = '"w"' },
                        { range = "bytes=6000-", if_range = '"w"' } }, ranges("/busy-once"))
      assert.are.equal(14000, file_bytes())
      assert.is_nil(r.stderr:find("restarting", 1, true))
      assert.are.same({}, proc.leftovers(tmp))
    end)

    it("within one run: a 503 after a broken transfer, then the rest", function ()
      local out = tmp .. "/c.bin"
      local r = run({ srv.base .. "/cut-then-busy", "-o", out })
      assert.are.equal(0, r.code, r.stderr)
      assert.matches("attempt 2/10: 503 %-> retry", r.stderr)
      same_bytes(WHOLE, proc.readfile(out))
      assert.are.same({ { range = false, if_range = false },
                        { range = "bytes=8000-", if_range = '"w"' },
                        { range = "bytes=8000-", if_range = '"w"' } }, ranges("/cut-then-busy"))
      assert.are.equal(20000, file_bytes())  -- 8000, then the other 12000
      assert.is_nil(r.stderr:find("restarting", 1, true))
      assert.are.same({}, proc.leftovers(tmp))
    end)

    it("to standard output too: the error page is not spliced in", function ()
      local r = run({ srv.base .. "/cut-then-busy" })
      assert.are.equal(0, r.code, r.stderr)
      same_bytes(WHOLE, r.stdout)
      assert.are.equal("bytes=8000-", ranges("/cut-then-busy")[3].range)
    end)

    it("an error answer that ends the call is what standard output shows, as ever", function ()
      local r = run({ srv.base .. "/cut-then-gone" })
      assert.are.equal(1, r.code, r.stderr)
      assert.matches("attempt 2/10: 404 %-> final", r.stderr)
      assert.are.equal("gone\n", r.stdout)
      assert.are.equal("bytes=8000-", ranges("/cut-then-gone")[2].range)
      local out = tmp .. "/gone.bin"
      srv:reset()
      r = run({ srv.base .. "/cut-then-gone", "-o", out })
      assert.are.equal(1, r.code, r.stderr)
      assert.is_nil(proc.readfile(out))
      assert.are.same({}, proc.leftovers(tmp))
    end)

    it("in a batch (--output-dir) too: each file keeps its bytes while it waits", function ()
      local dir = tmp .. "/batch"
      assert.are.equal(0, proc.sh("mkdir " .. proc.q(dir)))
      local r = run({ srv.base .. "/one.bin", srv.base .. "/two.bin", "--output-dir", dir,
                      "--parallel-max", "2" })
      assert.are.equal(0, r.code, r.stderr)
      for _, name in ipairs({ "one.bin", "two.bin" }) do
        same_bytes(WHOLE, proc.readfile(dir .. "/" .. name), name)
        assert.are.equal("bytes=8000-", ranges("/" .. name)[3].range)
      end
      assert.are.equal(40000, file_bytes())
      assert.are.same({}, proc.leftovers(dir))
    end)

    it("-C -: a 503 leaves the file as it was, and the rest is asked for again", function ()
      local out = tmp .. "/d.bin"
      proc.writefile(out, WHOLE:sub(1, 7000))
      local r = run({ srv.base .. "/busy-once", "-o", out, "-C", "-" })
      assert.are.equal(0, r.code, r.stderr)
      same_bytes(WHOLE, proc.readfile(out))
      local seen = ranges("/busy-once")
      assert.are.equal(2, #seen)
      assert.are.equal("bytes=7000-", seen[1].range)
      assert.are.equal("bytes=7000-", seen[2].range)
      assert.are.equal(13000, file_bytes())
    end)

    it("-C -: a final error answer leaves the file as it was (it emptied it)", function ()
      local out = tmp .. "/h.bin"
      proc.writefile(out, WHOLE:sub(1, 7000))
      local r = run({ srv.base .. "/gone", "-o", out, "-C", "-" })
      assert.are.equal(1, r.code, r.stderr)
      assert.matches("404 %-> final", r.stderr)
      assert.are.equal("bytes=7000-", ranges("/gone")[1].range)
      same_bytes(WHOLE:sub(1, 7000), proc.readfile(out))
    end)

    it("a run cut by its deadline among 503s keeps the earlier run's partial as it was", function ()
      local out, url = tmp .. "/e.bin", srv.base .. "/busy"
      plant(out, WHOLE:sub(1, 6000), url, '"w"')
      local r = run({ url, "-o", out, "--retry-max-time", "2" })
      assert.are.equal(5, r.code, r.stderr)
      local seen = ranges("/busy")
      assert.is_true(#seen >= 1)
      for _, s in ipairs(seen) do assert.are.equal("bytes=6000-", s.range) end
      assert.is_nil(proc.readfile(out))
      same_bytes(WHOLE:sub(1, 6000), proc.readfile(partial(out)))
      assert.are.equal(sidecar(url, '"w"'), proc.readfile(partial(out) .. ".url"))
    end)

    it("a fresh run cut by its deadline among 503s after a broken 200 keeps that 200's bytes", function ()
      local out, url = tmp .. "/f.bin", srv.base .. "/cut-then-busy-always"
      local r = run({ url, "-o", out, "--retry-max-time", "2" })
      assert.are.equal(5, r.code, r.stderr)
      local seen = ranges("/cut-then-busy-always")
      assert.is_true(#seen >= 2)
      assert.are.equal(false, seen[1].range)
      for i = 2, #seen do assert.are.equal("bytes=8000-", seen[i].range) end
      assert.is_nil(proc.readfile(out))
      same_bytes(WHOLE:sub(1, 8000), proc.readfile(partial(out)))
      assert.are.equal(sidecar(url, '"w"'), proc.readfile(partial(out) .. ".url"))
    end)
  end)
end)
