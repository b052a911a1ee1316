-- The rate limiter against a real rate limit: nginx's limit_req (burst 0,
-- 429 beyond), a batch of URLs at --parallel-max 8.  Unpaced, most attempts get
-- a 429; paced below the limit, or adaptive, few do.  The comparisons are
-- between runs of the same spec, with wide margins (a busy machine
-- delays requests, which only lowers the 429s of the paced runs).
local proc = require "support.proc"
local nginx = require "support.nginx"

-- nginx at `rate` requests a second, 429 beyond, every path its ok.txt.
local function start_nginx(rate)
  return nginx.start {
    files = { ["ok.txt"] = "ok\n" },
    http = ([[
  access_log DIR/logs/access.log;
  limit_req_zone $server_name zone=one:1m rate=RATEr/s;
  limit_req_status 429;]]):gsub("RATE", tostring(rate)),
    server = [[
    server_name spec;
    location / { limit_req zone=one; try_files /ok.txt =404; }]],
  }
end

local function statuses(dir)
  local ok, too_many = 0, 0
  for line in (proc.readfile(dir .. "/logs/access.log") or ""):gmatch("[^\n]+") do
    local status = line:match('" (%d%d%d) ')
    if status == "200" then ok = ok + 1 elseif status == "429" then too_many = too_many + 1 end
  end
  return ok, too_many
end

local describe_nginx = nginx.bin and describe or pending

describe_nginx("the rate limiter against nginx's limit_req", function ()
  local n, dir
  setup(function ()
    n = start_nginx(20)
    dir = n.dir
  end)
  teardown(function () if n then n:stop() end end)

  local function batch(set)
    local urls = {}
    for i = 1, 60 do urls[i] = ("%s/u/%d"):format(n.base, i) end
    proc.writefile(dir .. "/urls", table.concat(urls, "\n") .. "\n")
    n:reopen_logs()
    proc.sleep(1.5)   -- the limiter forgets the last run
    local args = { "run", proc.root .. "/policies/http.lua", "--urls", dir .. "/urls", "--parallel-max", "8",
                   "-s", "--output-dir", dir .. "/www",
                   -- short throttling waits: the spec's time goes to pacing, not backoff
                   "--set", "throttle_backoff.initial=0.1", "--set", "throttle_backoff.max=1",
                   "--set", "max_attempts=100" }
    for _, kv in ipairs(set) do args[#args + 1] = "--set"; args[#args + 1] = kv end
    local r = proc.run(args, { timeout = 300 })
    local ok, too_many = statuses(dir)
    return r, ok, too_many
  end

  it("unpaced, most attempts get a 429; at 15 a second (below nginx's 20), almost none; adaptive, few", function ()
    -- unpaced: http.lua without its guards (its own rate is adaptive)
    local r, ok, unpaced = batch { "rate=none", "budget=none" }
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(60, ok)
    assert.is_true(unpaced >= 30, "unpaced 429s: " .. unpaced)
    local paced
    r, ok, paced = batch { "rate.limit=15", "rate.adaptive=false" }
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(60, ok)
    assert.is_true(paced <= unpaced / 5, "paced 429s: " .. paced .. " against " .. unpaced)
    assert.is_true(r.secs >= 3.5, "60 URLs at 15 a second take 3.9 s at least: " .. r.secs)
    local adaptive
    r, ok, adaptive = batch {}   -- http.lua's own: rate = { adaptive = true }
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(60, ok)
    assert.is_true(adaptive <= unpaced / 2, "adaptive 429s: " .. adaptive .. " against " .. unpaced)
  end)
end)
