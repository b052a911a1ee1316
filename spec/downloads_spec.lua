-- Downloads that progress are never killed, downloads that stall are
-- retried, and a download that breaks is resumed with Range/If-Range,
-- never splicing two versions; against `luaretry faults` and its `file`
-- answers (Range, If-Range, resets mid-body).
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
package.path = here .. "/?.lua;" .. package.path
local proc = require "support.proc"
local cjson = require "cjson"

-- curl for the server's own answers: not under the sanitizer make test preloads
local CURL = "env -u LD_PRELOAD curl -s --max-time 10 "

local FAST = { "--set", "backoff.initial=0.01", "--set", "backoff.jitter_max=0.01", "--seed", "1" }

local function run(args)
  local t = { "run", "http" }
  for _, v in ipairs(args) do t[#t + 1] = v end
  for _, v in ipairs(FAST) do t[#t + 1] = v end
  return proc.run(t, { timeout = 60 })
end

-- What the server's `file` answer holds: byte i is (i + 17 * seed) % 251.
local function content(size, seed)
  local t = {}
  for i = 0, size - 1 do t[#t + 1] = string.char((i + 17 * (seed or 0)) % 251) end
  return table.concat(t)
end

local function count(s, pat)
  local n = 0
  for _ in s:gmatch(pat) do n = n + 1 end
  return n
end

describe("downloads", function ()
  local srv, tmp

  setup(function ()
    tmp = proc.tmpdir()
    srv = proc.server(here .. "/fixtures/downloads/server.lua")
  end)
  teardown(function ()
    if srv then srv:stop() end
    proc.rmtree(tmp)
  end)
  before_each(function () srv:reset() end)

  local function stats()
    return cjson.decode(proc.readfile_cmd(CURL .. proc.q(srv.base .. "/_faults/stats")))
  end

  local function ranges(path)
    local t = {}
    for _, r in ipairs(srv:requests_on(path)) do
      t[#t + 1] = { range = r.headers.range, if_range = r.headers["if-range"] }
    end
    return t
  end

  describe("the fault server's file answers", function ()
    local function get(path, headers)
      local cmd = CURL .. "-D - -o /dev/null"
      for _, h in ipairs(headers or {}) do cmd = cmd .. " -H " .. proc.q(h) end
      return proc.readfile_cmd(cmd .. " " .. proc.q(srv.base .. path))
    end

    it("answer Range with 206 and Content-Range, If-Range of another version with 200, past the end with 416", function ()
      local h = get("/whole", { "Range: bytes=100-" })
      assert.matches("^HTTP/1.1 206", h)
      assert.matches("Content%-Range: bytes 100%-19999/20000", h)
      assert.matches("Content%-Length: 19900", h)
      h = get("/whole", { "Range: bytes=100-", 'If-Range: "old"' })
      assert.matches("^HTTP/1.1 200", h)
      assert.matches("Content%-Length: 20000", h)
      h = get("/whole", { "Range: bytes=100-", 'If-Range: "w"' })
      assert.matches("^HTTP/1.1 206", h)
      h = get("/whole", { "Range: bytes=20000-" })
      assert.matches("^HTTP/1.1 416", h)
      assert.matches("Content%-Range: bytes %*/20000", h)
      assert.matches("Accept%-Ranges: bytes", h)
      assert.matches('ETag: "w"', h)
    end)

    it("reset the connection after reset_after bytes, and count the body bytes sent", function ()
      local body = proc.readfile_cmd(CURL .. proc.q(srv.base .. "/etag"))
      assert.are.equal(content(30000), body)
      assert.are.equal(30000, stats().file_bytes)
      -- a whole answer keeps its connection
      srv:reset()
      body = proc.readfile_cmd(CURL .. proc.q(srv.base .. "/whole") .. " " .. proc.q(srv.base .. "/whole"))
      assert.are.equal(content(20000):rep(2), body)
      local seen = srv:requests_on("/whole")
      assert.are.equal(2, #seen)
      assert.are.equal(seen[1].conn, seen[2].conn)
    end)
  end)

  describe("--speed-limit and --speed-time", function ()
    it("fail a stalled attempt as `stalled`, which is retried", function ()
      local r = run({ srv.base .. "/stall", "--speed-time", "1", "--speed-limit", "10" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("done\n", r.stdout)
      assert.matches("attempt 1/10: stalled error %-> retry", r.stderr)
    end)

    it("never cut a transfer that keeps moving: the http policy has no attempt timeout", function ()
      local r = run({ srv.base .. "/trickle", "--speed-time", "1", "--speed-limit", "100" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(3200, #r.stdout)
      assert.are.equal(1, #srv:requests_on("/trickle"))
      assert.is_true(r.secs > 2.5)  -- longer than --speed-time, in one attempt
    end)

    it("are the policy's stall_timeout and stall_speed, as --set would set them", function ()
      local r = run({ srv.base .. "/stall", "--set", "stall_timeout=1", "--set", "stall_speed=10" })
      assert.are.equal(0, r.code, r.stderr)
      assert.matches("stalled error", r.stderr)
    end)

    it("bound a workflow's http.* requests too (the policy's stall_timeout)", function ()
      local r = proc.run({ "run", here .. "/fixtures/downloads/workflow.lua", srv.base .. "/stall" }, { timeout = 60 })
      assert.are.equal(0, r.code, r.stderr)
      -- the first answer (\"s\", then another after 4 s) was cut by the stall
      assert.are.equal("done\n", r.stdout)
      assert.matches("attempt 1/3: 0 %-> retry", r.stderr)
      assert.are.equal(2, #srv:requests_on("/stall"))
    end)

    it("refuse 0, negative and non-numeric values, naming the option", function ()
      for _, bad in ipairs({ { "--speed-time", "0" }, { "--speed-time", "-1" }, { "--speed-time", "abc" },
                             { "-y", "0" }, { "--speed-limit", "0" }, { "--speed-limit", "-5" },
                             { "--speed-limit", "1.5" }, { "-Y", "x" } }) do
        local r = run({ srv.base .. "/whole", bad[1], bad[2] })
        assert.are.equal(2, r.code, bad[1] .. " " .. bad[2])
        assert.matches(bad[1]:gsub("%-", "%%-") .. " " .. bad[2]:gsub("%p", "%%%0") .. ": expected", r.stderr)
      end
      assert.are.equal(0, #srv:requests())
    end)
  end)

  describe("resume on retry", function ()
    it("asks Range: bytes=N- with If-Range: ETag, appends each 206, and the file is whole", function ()
      local out = tmp .. "/etag.bin"
      local r = run({ srv.base .. "/etag", "-o", out })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(content(100000), proc.readfile(out))
      local seen = ranges("/etag")
      assert.are.equal(4, #seen)
      assert.is_nil(seen[1].range)
      for i = 2, 4 do
        assert.are.equal(("bytes=%d-"):format((i - 1) * 30000), seen[i].range)
        assert.are.equal('"v1"', seen[i].if_range)
      end
      assert.are.equal(100000, stats().file_bytes)  -- not a byte sent twice
      assert.are.same({}, proc.leftovers(tmp))
    end)

    it("uses Last-Modified when there is no strong ETag", function ()
      local r = run({ srv.base .. "/lm", "-o", tmp .. "/lm.bin" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(content(50000), proc.readfile(tmp .. "/lm.bin"))
      local seen = ranges("/lm")
      assert.are.equal("bytes=20000-", seen[2].range)
      assert.are.equal("Wed, 21 Oct 2015 07:28:00 GMT", seen[2].if_range)
    end)

    it("does not resume on a weak ETag alone: the next attempt starts from zero", function ()
      local r = run({ srv.base .. "/weak" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(content(30000), r.stdout)
      assert.is_nil(ranges("/weak")[2].range)
    end)

    it("works for standard output (spooled) and --output-dir batches", function ()
      local r = run({ srv.base .. "/etag" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(content(100000), r.stdout)
      srv:reset()
      local dir = tmp .. "/batch"
      proc.sh("mkdir -p " .. proc.q(dir))
      r = run({ srv.base .. "/a.bin", srv.base .. "/b.bin", "--output-dir", dir, "--parallel-max", "2" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(content(40000), proc.readfile(dir .. "/a.bin"))
      assert.are.equal(content(25000, 3), proc.readfile(dir .. "/b.bin"))
      assert.are.equal("bytes=15000-", ranges("/a.bin")[2].range)
      assert.are.equal("bytes=10000-", ranges("/b.bin")[2].range)
      assert.are.equal(65000, stats().file_bytes)
    end)

    it("gives no attempt back: each counts towards max_attempts, progress or not", function ()
      local r = run({ srv.base .. "/etag", "-o", tmp .. "/short.bin", "--set", "max_attempts=3" })
      assert.are.equal(4, r.code, r.stderr)
      assert.is_nil(proc.readfile(tmp .. "/short.bin"))  -- -o: nothing left of a failed call
    end)
  end)

  describe("an answer that does not fit restarts from zero, and says so once", function ()
    it("a 200 to the Range request (a server that ignores Range)", function ()
      local r = run({ srv.base .. "/ignores", "-o", tmp .. "/ign.bin" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(content(30000), proc.readfile(tmp .. "/ign.bin"))
      assert.are.equal("bytes=10000-", ranges("/ignores")[2].range)
      assert.are.equal(1, count(r.stderr, "restarting the download from zero"))
      assert.matches("the server sent the whole resource %(200%)", r.stderr)
    end)

    it("a changed validator: the new version whole, nothing of the old one", function ()
      local r = run({ srv.base .. "/changes" })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(content(30002, 2), r.stdout)
      assert.are.equal('"v1"', ranges("/changes")[2].if_range)
      assert.are.equal(1, count(r.stderr, "restarting the download from zero"))
    end)

    it("a 206 that starts elsewhere, or of another total length: never written", function ()
      for path, why in pairs({ ["/wrong-start"] = "starts at byte 5, not at 10000",
                               ["/wrong-total"] = "the total length is now 99999 bytes, not 30000" }) do
        srv:reset()
        local r = run({ srv.base .. path, "-o", tmp .. "/w.bin" })
        assert.are.equal(0, r.code, r.stderr)
        assert.are.equal(content(30000), proc.readfile(tmp .. "/w.bin"))
        local seen = ranges(path)
        assert.are.equal(3, #seen, path)
        assert.are.equal("bytes=10000-", seen[2].range)
        assert.is_nil(seen[3].range)  -- from zero
        assert.matches("range error", r.stderr)
        assert.matches(why, r.stderr, 1, true)
        assert.are.equal(1, count(r.stderr, "restarting the download from zero"), path)
      end
    end)
  end)

  describe("-C - (continue a partial file)", function ()
    it("asks for the rest of the file on disk and appends it", function ()
      local out = tmp .. "/part.bin"
      proc.writefile(out, content(20000):sub(1, 7000))
      local r = run({ srv.base .. "/whole", "-C", "-", "-o", out })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(content(20000), proc.readfile(out))
      local seen = ranges("/whole")
      assert.are.equal(1, #seen)
      assert.are.equal("bytes=7000-", seen[1].range)
      assert.is_nil(seen[1].if_range)
      assert.are.equal(13000, stats().file_bytes)
    end)

    it("starts over when the server sends the whole file, and goes on across resets", function ()
      local out = tmp .. "/part2.bin"
      proc.writefile(out, string.rep("?", 5000))
      local r = run({ srv.base .. "/ignores", "-C", "-", "-o", out })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(content(30000), proc.readfile(out))
    end)

    it("leaves a file that is whole already as it is (416)", function ()
      local out = tmp .. "/done.bin"
      proc.writefile(out, content(20000))
      local r = run({ srv.base .. "/whole", "-C", "-", "-o", out })
      assert.are.equal(1, r.code, r.stderr)
      assert.matches("416", r.stderr)
      assert.are.equal(content(20000), proc.readfile(out))
    end)

    it("is -C - only, with a file", function ()
      local r = run({ srv.base .. "/whole", "-C", "100", "-o", tmp .. "/x" })
      assert.are.equal(2, r.code)
      assert.matches("only %-C %-", r.stderr)
      r = run({ srv.base .. "/whole", "-C", "-" })
      assert.are.equal(2, r.code)
      assert.matches("%-C %- continues a file", r.stderr)
      assert.are.equal(0, #srv:requests())
    end)
  end)
end)
