-- Downloads under a hedging policy (hedge = { delay = 0.1 }): a hedged
-- round writes what an unhedged call writes.  The error answer to a Range
-- request that ends a resumed call is what is shown (luaretry(1), -C:
-- "standard output shows it ... as any final answer"), never the bytes
-- of the download; a call cut by its deadline keeps the bytes the
-- attempt on the host's handle streamed, for the next run to continue,
-- never a hedge's; a winning hedge's empty body replaces the loser's
-- bytes.  Against `luaretry faults` (spec/fixtures/hedge/downloads.lua).
local proc = require "support.proc"
local dl = require "support.downloads"

local partial, sidecar = dl.partial, dl.sidecar
local WHOLE = dl.content(20000)
local BUSY = "the load balancer is busy\n"

local HEDGED = [[
max_attempts = 4
attempt_timeout = 10
backoff = { kind = "constant", initial = 0.01, jitter = "none" }
hedge = { delay = 0.1, max = 1 }
]]

local function same_bytes(want, got, what)
  assert.are.equal(#want, got and #got, (what or "") .. ": length")
  assert.is_true(want == got, (what or "") .. ": bytes differ")
end

describe("hedged downloads", function ()
  local srv, tmp
  proc.with_server(proc.root .. "/spec/fixtures/hedge/downloads.lua",
                   function (s, t) srv, tmp = s, t end)

  -- `luaretry run POLICY ARGS...` under the hedging policy
  local function run(args)
    local policy = tmp .. "/hedged.lua"
    proc.writefile(policy, HEDGED)
    return proc.run(proc.concat({ "run", policy }, args), { timeout = 60 })
  end

  local function mkdir(name)
    local d = tmp .. "/" .. name
    assert.are.equal(0, proc.sh("mkdir " .. proc.q(d)))
    return d
  end

  -- luaretry-policy(5), hedge: a hedge holds its body in memory until its
  -- round is decided, so a large download is run with --set hedge=none
  it("--set hedge=none sends no hedge: one request, the file whole", function ()
    local hedged, unhedged = tmp .. "/hedged.bin", tmp .. "/unhedged.bin"
    local r = run({ srv.base .. "/slow-file", "-o", hedged })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(2, #srv:requests_on("/slow-file"), "the policy hedges")
    r = run({ srv.base .. "/slow-file-unhedged", "-o", unhedged, "--set", "hedge=none" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(1, #srv:requests_on("/slow-file-unhedged"))
    same_bytes(WHOLE, proc.readfile(unhedged), "unhedged")
    same_bytes(WHOLE, proc.readfile(hedged), "hedged")
  end)

  -- The first attempt's reset comes at once, its hedge at 0.1 s: on a
  -- busy machine the hedge (which hangs) may go first and be attempt 2,
  -- and the Range request attempt 3.  Either order ends the same way.
  describe("the error answer to a Range request that ends the call", function ()
    -- the Range requests of path: at least one, each for the 8000 bytes on
    local function resumed_at_8000(path)
      local asked = 0
      for _, seen in ipairs(dl.ranges(srv, path)) do
        if seen.range then
          asked = asked + 1
          assert.are.equal("bytes=8000-", seen.range)
        end
      end
      assert.is_true(asked >= 1, "no Range request")
    end

    it("is what standard output shows, never the 8000 bytes the download had", function ()
      local r = run({ srv.base .. "/cut-then-gone" })
      assert.are.equal(1, r.code, r.stderr)
      assert.matches("attempt [23]/4: 404 %-> final", r.stderr)
      resumed_at_8000("/cut-then-gone")
      assert.are.equal("gone\n", r.stdout)
    end)

    it("with a hedge in flight beside it (cancelled): the same", function ()
      local r = run({ srv.base .. "/cut-then-slow-gone" })
      assert.are.equal(1, r.code, r.stderr)
      assert.matches("attempt [23]/4: 404 %-> final %(default%); %d in flight cancelled", r.stderr)
      resumed_at_8000("/cut-then-slow-gone")
      assert.are.equal("gone\n", r.stdout)
    end)

    it("is FILE's with --fail-with-body, and FILE never holds half a file", function ()
      local out = tmp .. "/gone.bin"
      local r = run({ srv.base .. "/cut-then-gone", "-o", out, "--fail-with-body" })
      assert.are.equal(1, r.code, r.stderr)
      assert.are.equal("gone\n", proc.readfile(out))
      srv:reset()
      local plain = tmp .. "/plain.bin"
      r = run({ srv.base .. "/cut-then-gone", "-o", plain })
      assert.are.equal(1, r.code, r.stderr)
      assert.is_nil(proc.readfile(plain))
      assert.are.same({}, proc.leftovers(tmp))
    end)

    -- 3 attempts: one for a hedge that went first, and one Range request
    -- at least, whose 503 ends the call
    it("exhausted on 503s: the last 503's page, to standard output and to FILE", function ()
      local r = run({ srv.base .. "/cut-then-busy", "--set", "max_attempts=3" })
      assert.are.equal(4, r.code, r.stderr)
      assert.matches("attempt [23]/3: 503 %-> exhausted", r.stderr)
      resumed_at_8000("/cut-then-busy")
      assert.are.equal(BUSY, r.stdout)
      srv:reset()
      local out = tmp .. "/busy.bin"
      r = run({ srv.base .. "/cut-then-busy", "--set", "max_attempts=3", "-o", out, "--fail-with-body" })
      assert.are.equal(4, r.code, r.stderr)
      assert.are.equal(BUSY, proc.readfile(out))
      assert.is_nil(proc.readfile(partial(out)))
    end)

    it("in a batch (-Z): each URL's file its own answer", function ()
      local dir = mkdir("batch")
      local r = run({ srv.base .. "/cut-then-gone", srv.base .. "/fast", "-Z", "--parallel-max", "4",
                      "--output-dir", dir, "--fail-with-body" })
      assert.are.equal(1, r.code, r.stderr)
      assert.are.equal("gone\n", proc.readfile(dir .. "/cut-then-gone"))
      assert.are.equal("fast\n", proc.readfile(dir .. "/fast"))
      assert.are.same({}, proc.leftovers(dir))
    end)
  end)

  -- the attempt breaks after 8000 bytes of the file at 2 s, beside its
  -- hedge (sent at 0.1 s), an error page that trickles until the deadline
  -- (4 s) cuts it and ends the call: the 8000 bytes are kept, never the
  -- page (the next run appended the rest to it, exit 0)
  describe("cut by its deadline while a hedge trickles an error page", function ()
    local function continued(out, url, ask)
      same_bytes(WHOLE:sub(1, 8000), proc.readfile(partial(out)), "the partial")
      assert.are.equal(sidecar(url, '"w"'), proc.readfile(partial(out) .. ".url"))
      assert.is_nil(proc.readfile(out))
      local before = #dl.ranges(srv, "/cut-beside-trickle")
      local r = run(ask)
      assert.are.equal(0, r.code, r.stderr)
      same_bytes(WHOLE, proc.readfile(out), "the file")
      -- the next run's Range request, whatever else it sent (a hedge,
      -- without one, when the answer took 0.1 s on a busy machine)
      local asked = {}
      for k, seen in ipairs(dl.ranges(srv, "/cut-beside-trickle")) do
        if k > before and seen.range then asked[#asked + 1] = seen.range end
      end
      assert.are.same({ "bytes=8000-" }, asked)
      assert.is_nil(proc.readfile(partial(out)))
    end

    it("keeps the attempt's 8000 bytes for the next run, which continues them", function ()
      local out, url = tmp .. "/t.bin", srv.base .. "/cut-beside-trickle"
      local args = { url, "-o", out, "--set", "deadline=4" }
      local r = run(args)
      assert.are.equal(5, r.code, r.stderr)
      assert.matches("attempt 1/4: reset error %-> in_flight", r.stderr)
      assert.matches("attempt 2/4 %(hedge%): timeout error %-> deadline", r.stderr)
      continued(out, url, args)
    end)

    it("in a batch (--output-dir) too", function ()
      local dir = mkdir("batch")
      local out, url = dir .. "/cut-beside-trickle", srv.base .. "/cut-beside-trickle"
      local args = { url, srv.base .. "/fast", "--parallel-max", "4", "--output-dir", dir,
                     "--set", "deadline=4" }
      local r = run(args)
      assert.are.equal(5, r.code, r.stderr)
      assert.matches("cut%-beside%-trickle: deadline, 2 attempts", r.stderr)
      assert.are.equal("fast\n", proc.readfile(dir .. "/fast"))
      continued(out, url, args)
    end)
  end)

  -- the attempt's whole 503 page is in the file while its hedge streams
  -- the resource (ETag "w"); SIGINT cuts the hedge: its bytes never
  -- reached the file, so its ETag names nothing there and no partial is
  -- kept (the 503 page was kept under "w", and the next run appended the
  -- rest to it, exit 0)
  describe("SIGINT while a hedge streams beside the attempt's 503 page", function ()
    -- the run in the background, cut by SIGINT once the 503 came (seen
    -- by its log line, or after 1.5 s more than the 0.5 s it takes)
    local function interrupted(args, seen)
      local policy = tmp .. "/hedged.lua"
      proc.writefile(policy, HEDGED)
      local jobdir = proc.tmpdir()
      local job = proc.spawn(proc.concat({ "run", policy }, args), jobdir)
      local ok, code, stderr = pcall(function ()
        assert.is_truthy(proc.wait_for(function ()
          return #srv:requests_on("/busy-beside-stream") >= 2 and seen(job)
        end, 20), "no hedge, or no 503")
        job:signal("INT")
        local c = job:wait(20)
        return c, job:stderr()
      end)
      job:stop()
      proc.rmtree(jobdir)
      assert(ok, code)
      return code, stderr
    end

    local function not_kept(out, url, args)
      assert.is_nil(proc.readfile(partial(out)))
      assert.is_nil(proc.readfile(partial(out) .. ".url"))
      assert.is_nil(proc.readfile(out))
      local before = #dl.ranges(srv, "/busy-beside-stream")
      local r = run(args)
      assert.are.equal(0, r.code, r.stderr)
      same_bytes(WHOLE, proc.readfile(out), "the file")
      -- the next run asks for the whole file: no request of its has a Range
      for k, seen in ipairs(dl.ranges(srv, "/busy-beside-stream")) do
        if k > before then assert.are.equal(false, seen.range) end
      end
    end

    it("keeps no partial of the 503 page under the hedge's ETag", function ()
      local out, url = tmp .. "/s.bin", srv.base .. "/busy-beside-stream"
      local args = { url, "-o", out }
      local code, stderr = interrupted(args, function (job)
        return (job:stderr() or ""):find("attempt 1/4: 503 -> in_flight", 1, true)
      end)
      assert.are.equal(130, code, stderr)
      not_kept(out, url, args)
    end)

    it("in a batch (--output-dir) too", function ()
      local dir = mkdir("batch")
      local out, url = dir .. "/busy-beside-stream", srv.base .. "/busy-beside-stream"
      local args = { url, srv.base .. "/fast", "--parallel-max", "4", "--output-dir", dir }
      local code, stderr = interrupted(args, function ()
        proc.sleep(1.5)
        return true
      end)
      assert.are.equal(130, code, stderr)
      assert.are.equal("fast\n", proc.readfile(dir .. "/fast"))
      not_kept(out, url, args)
    end)
  end)

  -- the sink took the winning hedge's body by the status on the host's
  -- handle, the cancelled attempt's (0): -C - dropped it all, exit 0
  it("-C - onto a new or empty file: a winning hedge's body is the file", function ()
    local url = srv.base .. "/hang-then-file"
    local out = tmp .. "/new.bin"
    local r = run({ url, "-o", out, "-C", "-" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(2, #srv:requests_on("/hang-then-file")) -- the attempt and its hedge
    same_bytes(WHOLE, proc.readfile(out), "the new file")
    srv:reset()
    local empty = tmp .. "/empty.bin"
    proc.writefile(empty, "")
    r = run({ url, "-o", empty, "-C", "-" })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(2, #srv:requests_on("/hang-then-file"))
    same_bytes(WHOLE, proc.readfile(empty), "the empty file")
    assert.are.same({}, proc.leftovers(tmp))
  end)

  -- -J read Content-Disposition on the host's handle, the cancelled
  -- attempt's (no answer): the file kept the URL's name
  it("-O -J: the file is named by the winning hedge's Content-Disposition", function ()
    local dir = mkdir("named")
    local r = run({ srv.base .. "/hang-then-named", "-O", "-J", "--output-dir", dir })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(2, #srv:requests_on("/hang-then-named"))
    assert.are.equal("won\n", proc.readfile(dir .. "/won.txt"))
    assert.is_nil(proc.readfile(dir .. "/hang-then-named"))
  end)

  -- the loser's streamed bytes were added to the hedge's, which replaced
  -- them in the file
  it("a batch's total counts a winning hedge's body, not the loser's stream it replaced", function ()
    local dir = mkdir("batch")
    local r = run({ srv.base .. "/stream-then-file", srv.base .. "/fast", "--parallel-max", "4",
                    "--output-dir", dir })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(2, #srv:requests_on("/stream-then-file"))
    same_bytes(WHOLE, proc.readfile(dir .. "/stream-then-file"), "the file")
    assert.matches("2 URLs: 2 succeeded, 0 failed, 20005 bytes,", r.stderr, 1, true)
  end)

  it("a batch's winning hedge with no body (204): its file is empty, nothing of the loser's stream", function ()
    local dir = mkdir("batch")
    local r = run({ srv.base .. "/slow-then-empty", srv.base .. "/fast", "--parallel-max", "4",
                    "--output-dir", dir })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(2, #srv:requests_on("/slow-then-empty")) -- the attempt and its hedge
    assert.are.equal("", proc.readfile(dir .. "/slow-then-empty"))
    assert.are.equal("fast\n", proc.readfile(dir .. "/fast"))
    assert.are.same({}, proc.leftovers(dir))
  end)
end)
