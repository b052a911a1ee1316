-- Uploads from any source: -d @FILE read as it is sent (memory flat for a
-- body of any size), FIFOs, process substitutions, /proc files and -d @-
-- spooled once and sent whole on every attempt, and a file that changes
-- size meanwhile a clear error, never a short body nor a signal.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
local proc = require "support.proc"

local root = proc.root
local HTTP = root .. "/policies/http.lua"
local GCS = root .. "/policies/gcs.lua"
local IDEM = here .. "/fixtures/run/post_idempotent.lua"
local MiB = 1024 * 1024

-- Runs luaretry from bash with `prefix` before it (a pipe, say) and a
-- command line where process substitution works; {code, stdout, stderr}.
local function run_bash(prefix, args, dir)
  local words = {}
  for _, a in ipairs(args) do words[#words + 1] = type(a) == "table" and a.raw or proc.q(a) end
  local out, err = dir .. "/.out", dir .. "/.err"
  local code = proc.sh("timeout -s KILL 30 bash -c " .. proc.q(prefix .. proc.q(proc.bin) .. " " ..
                       table.concat(words, " ") .. " >" .. proc.q(out) .. " 2>" .. proc.q(err)))
  return { code = code, stdout = proc.readfile(out), stderr = proc.readfile(err) }
end

describe("uploads", function ()
  local srv, tmp
  proc.with_server(here .. "/fixtures/run/server.lua", function (s, t) srv, tmp = s, t end)

  local function url(path) return srv.base .. path end

  it("-d @FIFO sends what its writer wrote", function ()
    local fifo = tmp .. "/fifo"
    proc.sh("mkfifo " .. proc.q(fifo))
    proc.sh("(printf 'from a fifo' > " .. proc.q(fifo) .. ") >/dev/null 2>&1 &")
    local r = proc.run({ "run", HTTP, url("/new"), "-d", "@" .. fifo }, { timeout = 20 })
    assert.are.equal(0, r.code, r.stderr)
    local seen = srv:requests_on("/new")
    assert.are.equal(11, seen[1].body_len)
    assert.are.equal(proc.fnv1a("from a fifo"), seen[1].body_hash)
  end)

  it("-d @<(cmd) sends the command's output, whole on every attempt", function ()
    local data = ("process substitution\n"):rep(5000)
    proc.writefile(tmp .. "/src", data)
    local r = run_bash("", { "run", IDEM, url("/always503"), "-d",
                             { raw = "@<(cat " .. proc.q(tmp .. "/src") .. ")" } }, tmp)
    assert.are.equal(4, r.code, r.stderr)
    local seen = srv:requests_on("/always503")
    assert.are.equal(3, #seen)
    for i = 1, 3 do
      assert.are.equal(#data, seen[i].body_len)
      assert.are.equal(proc.fnv1a(data), seen[i].body_hash)
    end
  end)

  it("-d @/proc/self/status sends what the file holds, though its size says 0", function ()
    local r = proc.run({ "run", HTTP, url("/new"), "-d", "@/proc/self/status" }, { timeout = 20 })
    assert.are.equal(0, r.code, r.stderr)
    assert.is_true(srv:requests_on("/new")[1].body_len > 200)
  end)

  it("-d @- is spooled once and sent whole on every attempt", function ()
    local data = proc.varied_bytes(300 * 1024)
    proc.writefile(tmp .. "/src", data)
    local r = run_bash("cat " .. proc.q(tmp .. "/src") .. " | ", { "run", IDEM, url("/always503"),
                                                                 "-d", "@-" }, tmp)
    assert.are.equal(4, r.code, r.stderr)
    local seen = srv:requests_on("/always503")
    assert.are.equal(3, #seen)
    for i = 1, 3 do assert.are.equal(proc.fnv1a(data), seen[i].body_hash) end
  end)

  it("-d @- that does not end is bounded by the deadline: exit 5, nothing sent", function ()
    local r = run_bash("sleep 2.5 | ", { "run", HTTP, url("/new"), "-d", "@-", "--set", "deadline=1" }, tmp)
    assert.are.equal(5, r.code, r.stderr)
    assert.matches("%-d @%- did not end before the deadline", r.stderr)
    assert.are.equal(0, #srv:requests_on("/new"))
  end)

  for _, change in ipairs { { "truncated", "truncate -s 1000" }, { "grown", "truncate -s 2000000" } } do
    it("a file " .. change[1] .. " between attempts: exit 2, a clear message, no signal, no temporary", function ()
      local file, out = tmp .. "/body.bin", tmp .. "/out.txt"
      proc.writefile(file, proc.varied_bytes(MiB))
      proc.writefile(out, "old\n")
      local job = proc.spawn({ "run", IDEM, url("/always503"), "-d", "@" .. file, "-o", out,
                               "--set", "backoff.initial=1" }, tmp)
      finally(function () job:stop() end)
      assert.truthy(proc.wait_for(function () return (job:stderr() or ""):find("retry in") end, 5))
      proc.sh(change[2] .. " " .. proc.q(file))
      local code = job:wait(5)
      assert.are.equal(2, code, job:stderr())
      assert.matches("%-d @.*body%.bin: the file changed size during the upload %(1048576 bytes, now %d+%)",
                     job:stderr())
      assert.are.equal("old\n", proc.readfile(out))
      assert.are.same({}, proc.leftovers(tmp))
      assert.are.equal(1, #srv:requests_on("/always503"))
    end)
  end

  it("gcs.lua, PUT ?ifGenerationMatch=0 of 64 MiB, 503 once: retried, exit 0, memory flat", function ()
    local file = tmp .. "/big.bin"
    assert.are.equal(0, proc.sh("head -c " .. 64 * MiB .. " /dev/urandom > " .. proc.q(file)))
    local job = proc.spawn({ "run", GCS, url("/bkt/obj?ifGenerationMatch=0"), "-X", "PUT",
                             "-d", "@" .. file, "--set", "backoff.initial=0.05" }, tmp)
    finally(function () job:stop() end)
    local peak = proc.watch_rss(job, 60)
    local code = job:wait(5)
    assert.are.equal(0, code, job:stderr())
    assert.are.equal("stored\n", job:stdout())
    local seen = srv:requests_on("/bkt/obj")
    assert.are.equal(2, #seen)
    assert.are.equal(64 * MiB, seen[1].body_len)
    assert.are.equal(64 * MiB, seen[2].body_len)
    assert.are.equal(seen[1].body_hash, seen[2].body_hash)
    if not proc.asan() then
      assert.is_true(peak < 64 * MiB, ("peak RSS %.1f MiB"):format(peak / MiB))
    end
  end)
end)
