-- testing.lua: helpers for the busted specs of policy scripts.
--
-- They run in the host Lua (stock lua5.4 with busted), not in the sandbox,
-- and drive the real engine through the Lua module (`require "luaretry"`,
-- build/luaretry.so): every verdict and wait below is the engine's own, on
-- its virtual clock, so a spec of a 20-minute schedule runs in milliseconds.
--
--   package.path = "lua/?.lua;" .. package.path   -- or share/luaretry/lua
--   local testing = require "testing"
--
--   local r = testing.run("policies/gcs.lua", { 503, 503, 200 })
--   assert.equal(3, r.attempts)
--   assert.equal("success", r.verdict)
--
-- Outcomes, in every function that takes them:
--   503                         an HTTP status
--   "reset"                     status 0 with that transport failure; also
--                               "connect", "timeout", "dns", "tls",
--                               "tls_verify", "truncated", "protocol",
--                               "too_many_redirects", "redirect_refused", "too_large",
--                               "transport"
--   { status = 409, body = '...', error = ..., headers = { ["Retry-After"] = "5" },
--     retry_after = 5, method = "PUT", url = "...", workflow = true,
--     kind = "command" }        an outcome table, as p:classify takes it
--
-- testing.run(policy, outcomes [, opts]) -> result
--   Runs one call of `policy` (a path, or a policy from luaretry.load)
--   against the scripted outcomes, one per attempt; when the list runs out
--   its last entry repeats.  opts:
--     seed      jitter seed (default 1): the same seed, the same waits
--     set       overrides for luaretry.load, e.g. { ["backoff.jitter"] = "none",
--               ["options.retry_404"] = true } (a path only)
--     outcome   fields added to every outcome, e.g. { workflow = true }
--     duration  seconds each attempt lasts on the virtual clock (default 0),
--               or function(attempt) -> seconds; an attempt longer than its
--               timeout ends at the timeout as status 0, error "timeout"
--     limit     attempts after which run gives up with an error (10000): a
--               policy whose waits are all 0 never reaches a deadline
--     request   the request each attempt sends ({ method =, url =, headers =,
--               body = }; default a GET of http://localhost/): prepare(request, attempt, info) runs
--               before each attempt and is_idempotent decides, as in `luaretry
--               run`: a transient answer to a request that is not idempotent is
--               final, unless the connection was never made
--   Each call has a budget and breaker of its own (two runs never share
--   them), and a Retry-After header in an outcome is read as the engine
--   reads one (delta-seconds or an HTTP-date).
--   result:
--     attempts  the number of attempts made
--     waits     the whole wait after each retried attempt, in seconds: the
--               decision's and what the rate limiter adds as the next
--               attempt goes (c:next, as `run` and `simulate` ask it)
--     verdict   how the call ended: "success", "final", "exhausted",
--               "deadline", "policy_error", ...
--     elapsed   seconds from the call's start to its last decision
--     rule      what decided the end ("policies/gcs.lua:41", "max_attempts",
--               "deadline", "idempotency", ...)
--     message   the engine's detail (a policy error, a missed deadline), or nil
--     decisions every decision, as p:begin():report() gives them
--     requests  the request of each attempt, as prepare left it
--     final     the last decision
--
-- testing.classify(policy, outcome [, opts]) -> decision
--   The decision on one outcome as a first attempt (p:classify).
-- testing.verdicts(policy, outcomes [, opts]) -> { "retry", "final", ... }, decisions
--   The verdict of each outcome as a first attempt: "success", "retry",
--   "final", "policy_error" (or "exhausted" under max_attempts = 1).
-- testing.waits(policy [, opts]) -> waits, result
--   The waits of a call whose every attempt fails with opts.outcome (default
--   503): the policy's schedule, through its own classifier.
-- testing.wait_range(policy, outcomes [, opts]) -> { { min =, max = }, ... }
--   The smallest and largest wait seen before each retry over opts.seeds
--   runs (default 200, seeds 1..N): bounds of jittered waits.
-- testing.load(policy [, opts]) -> policy
--   luaretry.load with opts.set; raises the load error (file, line, field).
-- testing.outcome(x) -> outcome table (see above)
-- testing.is_idempotent(policy, request) -> boolean
--   The script's is_idempotent(request) ({ method =, url =, headers = {...},
--   body =, body_len = }), run by the engine as `luaretry run` runs it (the
--   script sees body_len and the first body_limit bytes of the body; a
--   body_len above #body stands for a longer upload); without one, the
--   engine's rule (GET, HEAD, OPTIONS, PUT, DELETE).
-- testing.script(policy_path) -> env
--   That environment: the script's globals (functions, options, ...), for
--   unit tests of its helpers.
local lr = require "luaretry"

local M = {}

local TRANSPORT = { connect = true, timeout = true, reset = true, dns = true,
                    tls = true, tls_verify = true, truncated = true, protocol = true,
                    too_many_redirects = true, redirect_refused = true, too_large = true,
                    transport = true }

--- An outcome table from a status, a transport failure's name or a table.
function M.outcome(x)
  local t = type(x)
  if t == "number" then
    if math.type(x) ~= "integer" and x ~= math.floor(x) then
      error("testing: a status must be a whole number, got " .. x, 2)
    end
    return { status = math.tointeger(x) }
  elseif t == "string" then
    if not TRANSPORT[x] then
      error(("testing: unknown outcome %q (a status, a table, or one of connect, "
             .. "timeout, reset, dns, tls, tls_verify, truncated, protocol, too_many_redirects, redirect_refused, "
             .. "too_large, transport)"):format(x), 2)
    end
    return { status = 0, error = x }
  elseif t == "table" then
    local o = {}
    for k, v in pairs(x) do o[k] = v end
    return o
  end
  error("testing: an outcome is a status, a transport failure's name or a table, got a "
        .. t, 2)
end

local function with(outcome, extra)
  if not extra then return outcome end
  for k, v in pairs(extra) do
    if outcome[k] == nil then outcome[k] = v end
  end
  return outcome
end

--- luaretry.load with opts.set, raising the load error.
function M.load(policy, opts)
  opts = opts or {}
  if type(policy) == "userdata" then
    if opts.set and next(opts.set) then
      error("testing: opts.set needs a policy path (a loaded policy is not changed)", 2)
    end
    return policy
  end
  if type(policy) ~= "string" then
    error("testing: expected a policy path or a loaded policy, got a " .. type(policy), 2)
  end
  local p, msg, name = lr.load(policy, { set = opts.set })
  if not p then error(("testing: %s: %s"):format(name or "load failed", msg), 2) end
  return p
end

local function duration_of(opts, attempt)
  local d = opts.duration
  if type(d) == "function" then d = d(attempt) end
  d = d or 0
  if type(d) ~= "number" or d ~= d or d < 0 then
    error("testing: opts.duration must give seconds, 0 or more", 3)
  end
  return d
end

local NEVER_SENT = { connect = true, dns = true }

-- The Retry-After of an outcome's headers, read as the engine reads it.
local function retry_after(o)
  if o.retry_after ~= nil or type(o.headers) ~= "table" then return o end
  for name, value in pairs(o.headers) do
    if type(name) == "string" and name:lower() == "retry-after" then
      o.retry_after = lr.retry_after(tostring(value))
      break
    end
  end
  return o
end

-- The request of attempt n (prepare), and what the outcome owes to it.
local function attempt_request(c, request, n, o)
  local req, msg = c:prepare(request, n)
  if not req then return nil, msg end
  local idem, imsg = c:is_idempotent(req)
  if idem == nil then return nil, imsg end
  o.method = o.method or req.method
  o.url = o.url or req.url
  if not idem and not (o.status == 0 and NEVER_SENT[o.error]) then o.not_repeatable = true end
  return req
end

-- The outcome of attempt n, cut to its timeout.
local function timed_outcome(c, list, n, opts)
  local o = retry_after(with(M.outcome(list[math.min(n, #list)]), opts.outcome))
  local took = duration_of(opts, n)
  local timeout = c:timeout()
  if timeout > 0 and took > timeout then
    took = timeout
    o = { status = 0, error = "timeout", method = o.method, url = o.url,
          workflow = o.workflow, kind = o.kind }
  end
  if took > 0 then assert(c:wait(took)) end
  return o
end

--- One call against scripted outcomes, on the virtual clock.
-- c:next() until the attempt may go at once; each wait it adds is waited
-- and added to the wait before attempt n.  The last answer: a stop, or go.
local function ask_next(c, r, n)
  for _ = 1, 10000 do
    local d, msg = c:next()
    if not d then error("testing.run: " .. tostring(msg), 3) end
    if not d.retry or not (d.wait > 0) then return d end
    if n > 1 then r.waits[n - 1] = r.waits[n - 1] + d.wait end
    assert(c:wait(d.wait))
  end
  error("testing.run: the rate limiter never let an attempt go", 3)
end

function M.run(policy, outcomes, opts)
  opts = opts or {}
  if type(outcomes) ~= "table" or #outcomes == 0 then
    error("testing.run: expected a non-empty list of outcomes", 2)
  end
  local p = M.load(policy, opts)
  local list = {}
  for i, x in ipairs(outcomes) do list[i] = M.outcome(x) end
  local limit = opts.limit or 10000
  local request = {}
  for k, v in pairs(opts.request or {}) do request[k] = v end
  request.method = request.method or "GET"
  request.url = request.url or "http://localhost/"
  local c = assert(p:begin { virtual = true, seed = opts.seed or 1, isolated = true })
  local r = { attempts = 0, waits = {}, decisions = {}, requests = {} }
  while true do
    local n = r.attempts + 1
    if n > limit then
      error(("testing.run: still retrying after %d attempts; does the policy ever stop? "
             .. "(opts.limit)"):format(limit), 2)
    end
    -- asked before each attempt, as a host does: the rate limiter's token
    -- (a wait added to the one before, or a stop before the attempt)
    local go = ask_next(c, r, n)
    if not go.retry then
      r.decisions[#r.decisions + 1] = go
      break
    end
    local o = timed_outcome(c, list, n, opts)
    local req, msg = attempt_request(c, request, n, o)
    if not req then error("testing.run: " .. tostring(msg), 2) end
    local d, rmsg = c:report(o)
    if not d then error("testing.run: " .. tostring(rmsg), 2) end
    r.attempts, r.decisions[#r.decisions + 1], r.requests[n] = n, d, req
    if not d.retry then break end
    r.waits[#r.waits + 1] = d.wait
    assert(c:wait(d.wait))
  end
  local final = r.decisions[#r.decisions]
  r.final = final
  r.verdict = final.verdict
  r.elapsed = final.elapsed
  r.rule = final.rule
  r.message = final.message
  c:close()
  return r
end

--- The decision on one outcome as a first attempt.
function M.classify(policy, x, opts)
  local p = M.load(policy, opts)
  local o = with(M.outcome(x), opts and opts.outcome)
  local d, msg = p:classify(o)
  if not d then error("testing.classify: " .. tostring(msg), 2) end
  return d
end

--- The verdict of each outcome as a first attempt.
function M.verdicts(policy, list, opts)
  local p = M.load(policy, opts)
  local verdicts, decisions = {}, {}
  for i, x in ipairs(list) do
    local d = M.classify(p, x, { outcome = opts and opts.outcome })
    verdicts[i], decisions[i] = d.verdict, d
  end
  return verdicts, decisions
end

--- The waits of a call that fails every time.
function M.waits(policy, opts)
  opts = opts or {}
  local r = M.run(policy, { opts.outcome or 503 }, {
    seed = opts.seed, set = opts.set, duration = opts.duration, limit = opts.limit })
  return r.waits, r
end

--- Smallest and largest wait before each retry, over many seeds.
function M.wait_range(policy, outcomes, opts)
  opts = opts or {}
  local p = M.load(policy, opts)
  local ranges = {}
  for seed = 1, opts.seeds or 200 do
    local r = M.run(p, outcomes, { seed = seed, outcome = opts.outcome,
                                   duration = opts.duration, limit = opts.limit })
    for i, w in ipairs(r.waits) do
      local b = ranges[i]
      if not b then ranges[i] = { min = w, max = w, count = 1 }
      else
        if w < b.min then b.min = w end
        if w > b.max then b.max = w end
        b.count = b.count + 1
      end
    end
  end
  return ranges
end

-- ---- a script in a plain environment shaped like the sandbox

local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."

local function datadir()
  local d = os.getenv("LUARETRY_DATADIR")
  if d and d ~= "" then return d end
  return here .. "/.."
end

local function sandbox_env(script_dir)
  local env = {}
  for _, k in ipairs { "assert", "error", "getmetatable", "ipairs", "next", "pairs",
                       "pcall", "rawequal", "rawget", "rawlen", "rawset", "select",
                       "setmetatable", "tonumber", "tostring", "type", "xpcall",
                       "_VERSION", "print" } do
    env[k] = _G[k]
  end
  env.load = function(chunk, name, _, e) return load(chunk, name, "t", e or env) end
  local str = {}
  for k, v in pairs(string) do if k ~= "dump" then str[k] = v end end
  env.string = str
  env.table, env.math, env.utf8 = table, math, utf8
  env.os = { time = os.time, clock = os.clock, date = os.date }
  -- json.encode / json.decode, as the sandbox's (Debian's lua-dkjson)
  local ok, dkjson = pcall(require, "dkjson")
  if ok and type(dkjson) == "table" then
    env.json = { encode = dkjson.encode, decode = dkjson.decode }
  end
  env._G = env
  local loaded = {}
  local dirs = { script_dir, datadir() .. "/lua", datadir() .. "/policies" }
  env.require = function(name)
    if loaded[name] ~= nil then return loaded[name] end
    local rel = tostring(name):gsub("%.", "/")
    for _, dir in ipairs(dirs) do
      local path = dir .. "/" .. rel .. ".lua"
      local f = io.open(path, "r")
      if f then
        f:close()
        local chunk = assert(loadfile(path, "t", env))
        local v = chunk(name)
        if v == nil then v = true end
        loaded[name] = v
        return v
      end
    end
    error(("require: module '%s' not found in %s"):format(name, table.concat(dirs, ", ")), 2)
  end
  return env
end

--- The globals of a script run in a plain environment like the sandbox.
function M.script(path)
  local dir = path:match("^(.*)/[^/]*$") or "."
  local env = sandbox_env(dir)
  local chunk = assert(loadfile(path, "t", env))
  local ret = chunk()
  if type(ret) == "table" then
    for k, v in pairs(ret) do env[k] = v end
  end
  return env
end

--- The script's is_idempotent(request), or the engine's method rule, run
--- by the engine.
function M.is_idempotent(policy, request)
  local p = M.load(policy)
  local req = {}
  for k, v in pairs(request) do req[k] = v end
  local body = req.body
  if req.body_len and body and req.body_len > #body then
    req.body = body .. (" "):rep(req.body_len - #body)  -- a longer upload
  elseif req.body_len and not body then
    req.body = (" "):rep(req.body_len)
  end
  local v, msg = p:is_idempotent(req)
  if v == nil then error("testing.is_idempotent: " .. tostring(msg), 2) end
  return v
end

return M
