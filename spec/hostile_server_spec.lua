-- The hostile server corpus: connections that break mid-body, heads that
-- never end or are too big, status lines that are not, HTTP/0.9, slow and
-- endless bodies, broken chunking, a compression bomb, a redirect loop and
-- every malformed Retry-After.  Each must end in a bounded time with the
-- right verdict, luaretry's resident memory under 64 MiB (asserted in the
-- normal build: ASan inflates it) and no temporary file left.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
local proc = require "support.proc"

local HTTP = proc.root .. "/policies/http.lua"
local MiB = 1024 * 1024
-- two attempts, short waits, one second each, three for the call
local SET = { "--set", "max_attempts=2", "--set", "backoff.initial=0.05", "--set",
              "backoff.jitter_max=0.05", "--set", "attempt_timeout=1", "--set", "deadline=3",
              "--seed", "1" }

-- path, exit status, the final attempt line's pattern, seconds at most
local CASES = {
  { "/reset-mid-body", 4, "attempt 2/2: reset error %-> exhausted .*Connection reset by peer", 1 },
  { "/fin-mid-body", 4, "attempt 2/2: truncated error %-> exhausted .*95000 bytes remaining", 1 },
  { "/reset-mid-stream", 4, "attempt 2/2: reset error %-> exhausted", 2 },
  { "/endless-headers", 4, "attempt 2/2: protocol error %-> exhausted .*headers are longer than 262144 bytes", 2 },
  { "/huge-header", 4, "attempt 2/2: %a+ error %-> exhausted", 2 },
  { "/endless-continue", 4, "attempt 2/2: %a+ error %-> exhausted", 3.5 },
  { "/bad-status", 4, "attempt 2/2: protocol error %-> exhausted", 1 },
  { "/bad-version", 4, "attempt 2/2: protocol error %-> exhausted .*Unsupported HTTP version", 1 },
  { "/status-999", 1, "attempt 1/2: 999 %-> final", 1 },
  { "/http09", 4, "attempt 2/2: protocol error %-> exhausted .*HTTP/0%.9", 1 },
  { "/nul-in-head", 4, "attempt 2/2: protocol error %-> exhausted", 1 },
  { "/slow-body", 4, "attempt 2/2: timeout error %-> exhausted", 3.5 },
  { "/drip-forever", 4, "attempt 2/2: timeout error %-> exhausted", 3.5 },
  { "/bad-chunk-size", 4, "attempt 2/2: %a+ error %-> exhausted .*chunked", 1 },
  { "/huge-chunk-size", 4, "attempt 2/2: %a+ error %-> exhausted .*chunked", 1 },
  { "/endless-chunks", 4, "attempt 2/2: timeout error %-> exhausted", 3.5 },
  { "/endless-body", 4, "attempt 2/2: timeout error %-> exhausted", 3.5 },
  { "/bad-length", 4, "attempt 2/2: protocol error %-> exhausted .*Content%-Length", 1 },
  { "/two-lengths", 4, "attempt 2/2: %a+ error %-> exhausted", 1 },
  -- not followed without -L, as curl: the 302 is the answer
  { "/redirect-loop", 0, "attempt 1/2: 302 %-> success", 1 },
}

-- Retry-After values that are no wait: the backoff decides
for _, name in ipairs { "empty", "word", "negative", "fraction", "hex", "exponent", "bad-date",
                        "past-date", "binary" } do
  CASES[#CASES + 1] = { "/ra-" .. name, 4, "attempt 1/2: 503 %-> retry in 0%.%d+ s %(backoff;", 1 }
end
-- a wait longer than max_retry_after (a huge number is one): stop at once
for _, name in ipairs { "overflow", "huge", "far" } do
  CASES[#CASES + 1] = { "/ra-" .. name, 5, "attempt 1/2: 503 %-> server_wait_too_long", 1 }
end
-- a valid one after 300 other headers still counts
CASES[#CASES + 1] = { "/ra-after-300-headers", 0, "attempt 1/2: 503 %-> retry in 1%.%d+ s %(server;", 2 }

describe("the hostile server corpus", function ()
  local srv, tmp
  setup(function () srv = proc.server(here .. "/hostile_server/server.lua") end)
  teardown(function () if srv then srv:stop() end end)
  before_each(function () tmp = proc.tmpdir() end)
  after_each(function () proc.rmtree(tmp) end)

  -- Runs luaretry against `url` in the background: exit status, seconds
  -- (the last logged decision's elapsed: the engine's own clock from the
  -- call's start, which a busy machine's start-up is not in; a run that
  -- does not end is caught by the waits), peak resident memory, stderr.
  local function against(url, more)
    local log = tmp .. "/log.json"
    local args = { "run", HTTP, url, "-o", tmp .. "/out", "--log-json", log }
    for _, a in ipairs(SET) do args[#args + 1] = a end
    for _, a in ipairs(more or {}) do args[#args + 1] = a end
    local job = proc.spawn(args, tmp)
    local peak = proc.watch_rss(job, 20)
    local code = job:wait(5)
    job:stop()
    local secs
    for _, line in ipairs(proc.lines(proc.readfile(log))) do
      local o = proc.json.decode(line)
      if o.elapsed then secs = o.elapsed end
    end
    os.remove(log)
    return code, secs, peak, job:stderr() or ""
  end

  for _, case in ipairs(CASES) do
    local path, want, pattern, limit = table.unpack(case)
    it(path .. ": exit " .. want .. " within " .. limit .. " s", function ()
      local code, secs, peak, stderr = against(srv.base .. path)
      assert.are.equal(want, code, stderr)
      assert.matches(pattern, stderr)
      assert.is_true(secs < limit + 0.5, ("decided at %.2f s"):format(secs))
      assert.are.same({}, proc.leftovers(tmp))
      if not proc.asan() then
        assert.is_true(peak < 64 * MiB, ("peak RSS %.1f MiB"):format(peak / MiB))
      end
    end)
  end

  it("a compression bomb (256 MiB of zeros in 256 KiB of gzip) is passed on as sent", function ()
    local gz = tmp .. "/bomb.gz"
    assert.are.equal(0, proc.sh("head -c " .. 256 * MiB .. " /dev/zero | gzip -9 > " .. proc.q(gz)))
    local bomb = proc.readfile(gz)
    local script = tmp .. "/bomb.lua"
    proc.writefile(script, "respond = {status = 200, headers = {['Content-Encoding'] = 'gzip'}, body = " ..
                   string.format("%q", bomb) .. "}\n")
    local bombs = proc.server(script)
    finally(function () bombs:stop() end)
    local code, secs, peak, stderr = against(bombs.base .. "/")
    assert.are.equal(0, code, stderr)
    assert.is_true(secs < 2, ("decided at %.2f s"):format(secs))
    -- without --compressed, as curl: the bytes as they came, not inflated
    assert.are.equal(#bomb, #proc.readfile(tmp .. "/out"))
    if not proc.asan() then
      assert.is_true(peak < 64 * MiB, ("peak RSS %.1f MiB"):format(peak / MiB))
    end
  end)
end)
