-- The numbers of the command's own options (luaretry(1): "A number an
-- option takes ... is written as a policy file writes one and --set takes
-- it"): one rule for all of them, the policy's, so that `-m X` and `--set
-- attempt_timeout=X` take the same spellings; a spelling it refuses is a
-- usage error (2) naming the option as typed.  `run -m 0x2` exited 3 with
-- "--set attempt_timeout: ...", a --set never typed, and `--retry ' 1'`
-- was taken as 1 where `--set max_attempts=' 1'` is refused.  Against the
-- fault server's echo: a value taken makes one request, a refused one none.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
package.path = here .. "/?.lua;" .. package.path
local proc = require "support.proc"

local function run(args) return proc.run(proc.concat({ "run" }, args), { timeout = 60 }) end

-- Spellings that strtod, strtol or the rule read differently.
local SPELLINGS = { "2", "2.5", ".5", "5.", "1e1", "1E1", "2e-1", "0.5e+1", "2.0", "010", "0x2", " 1",
                    "1 ", "+1", "inf", "nan", "1e999", "", "1.5.2", "e1", "-", "1e", "2s", "-1" }

describe("the options' numbers", function ()
  local srv, tmp
  proc.with_server(here .. "/fixtures/curl_more/echo.lua", function (s, t) srv, tmp = s, t end)

  -- run ARGS against PATH: taken (exit 0, one request) or refused (exit 2
  -- naming `named`, no request), as `want` says; the stderr
  local function taken(args, path, want, named)
    srv:reset()
    local r = run(proc.concat({ "-s", "-S" }, args, { srv.base .. path }))
    local sent = #srv:requests_on(path)
    if want then
      assert.are.equal(0, r.code, table.concat(args, " ") .. ": " .. r.stderr)
      assert.are.equal(1, sent)
    else
      assert.are.equal(2, r.code, table.concat(args, " ") .. ": " .. r.stderr)
      assert.are.equal(0, sent)
      assert.matches("^luaretry: run: " .. named:gsub("%p", "%%%0"), r.stderr)
      assert.not_matches("%-%-set", r.stderr:match("^[^\n]*"))
    end
    return r.stderr
  end

  it("-m and --retry take the spellings --set attempt_timeout and max_attempts take, no other", function ()
    for _, v in ipairs(SPELLINGS) do
      -- the policy's own answer, as --set gives it (3: does not load)
      local set = run({ "-s", "--set", "attempt_timeout=" .. v, srv.base .. "/set" })
      assert.is_true(set.code == 0 or set.code == 3, set.stderr)
      local shown = v:find("^%S+$") and v or "'" .. v .. "'"
      taken({ "-m", v }, "/m", set.code == 0, "-m " .. shown .. ": expected seconds")
      -- --retry N is max_attempts N + 1: the same rule, a whole number
      set = run({ "-s", "--set", "max_attempts=" .. v, srv.base .. "/set" })
      taken({ "--retry", v }, "/retry", set.code == 0,
            "--retry " .. shown .. ": expected a whole number of retries")
    end
  end)

  it("every number option of run is refused the same way, named as typed; the rule's news when strtod reads it", function ()
    for _, case in ipairs {
      { { "--max-time", "0x2" }, "--max-time 0x2: expected seconds, 0 (none) or more (a decimal number " ..
                                 "as a policy file writes it: no spaces, '+', hex, inf or nan)" },
      { { "--retry-max-time", "+5" }, "--retry-max-time +5: expected seconds" },
      { { "--connect-timeout", "nan" }, "--connect-timeout nan: expected seconds" },
      { { "--retry-delay", "inf" }, "--retry-delay inf: expected seconds from 0 to 1000000" },
      { { "--max-redirs", " 3" }, "--max-redirs ' 3': expected a whole number (-1: no limit)" },
      { { "--parallel-max", "0x10" }, "--parallel-max 0x10: expected a whole number from 1 to 1000" },
      { { "--seed", "+1" }, "--seed +1: expected a whole number, 0 or more" },
      { { "-Y", "1e" }, "-Y 1e: expected bytes per second" },
      { { "--speed-time", "0x1" }, "--speed-time 0x1: expected seconds above 0" },
      { { "--limit-rate", "0x10k" }, "--limit-rate 0x10k: expected bytes above 0" },
      { { "--max-filesize", " 1k" }, "--max-filesize ' 1k': expected bytes above 0" },
    } do
      local err = taken(case[1], "/refused", false, case[2])
      assert.matches(case[2], err, 1, true)
    end
    -- and what the rule takes, each as a decimal: 1e1 retries, a second and
    -- a half, a seed of 20 digits, a k of 1.5
    for _, args in ipairs { { "--retry", "1e1" }, { "--max-time", "1.5e1" }, { "--connect-timeout", "2.0" },
                            { "--max-redirs", "-1" }, { "--parallel-max", "1e1" },
                            { "--seed", "18446744073709551615" }, { "--retry-delay", ".5" },
                            { "--limit-rate", "1.5k" }, { "--max-filesize", "1e3k" }, { "-y", "1e1" },
                            { "-Y", "1.0" } } do
      taken(args, "/taken", true)
    end
  end)

  it("a -K line's number: the same rule, the file and line named", function ()
    local cfg = tmp .. "/k.conf"
    proc.writefile(cfg, "silent\nmax-time = 0x2\n")
    srv:reset()
    local r = run({ "-K", cfg, srv.base .. "/k" })
    assert.are.equal(2, r.code, r.stderr)
    assert.matches("-K " .. cfg .. ", line 2: run: --max-time 0x2: expected seconds", r.stderr, 1, true)
    assert.are.equal(0, #srv:requests_on("/k"))
  end)

  it("--retry-on-exit and --final-on-exit: each status by the rule", function ()
    local r = run({ "-s", "-S", "--retry-on-exit", "1, 0x2", "--", "true" })
    assert.are.equal(2, r.code, r.stderr)
    assert.matches("^luaretry: run: %-%-retry%-on%-exit '1, 0x2': expected exit statuses from 0 to 255", r.stderr)
    r = run({ "-s", "-S", "--final-on-exit", "1e0,2.0", "--", "sh", "-c", "exit 2" })
    assert.are.equal(1, r.code, r.stderr) -- 2 is final: one attempt, judged final
  end)

  it("simulate's numbers: the same rule", function ()
    local policy = proc.root .. "/policies/http.lua"
    for _, case in ipairs {
      { { "--attempts", "0x3" }, "--attempts 0x3: expected a whole number from 1 to 1000000 (a decimal" },
      { { "--seed", " 1" }, "--seed ' 1': expected a whole number, 0 or more (a decimal" },
      { { "--clients", "+2" }, "--clients +2: expected a whole number from 1 to 1000000" },
      { { "--clients", "2", "--outage", "inf" }, "--outage inf: expected seconds from 0 to 1e6" },
      { { "--clients", "2", "--status", "0x1f7" }, "--status 0x1f7: expected an HTTP status" },
      { { "--latency", "0x1" }, "--latency 0x1: expected BASE or BASE,SLOW@FRACTION" },
      { { "--latency", "0.01,1@+0.5" }, "--latency 0.01,1@+0.5: expected BASE" },
      { { "--latency", "0.01", "--calls", " 5" }, "--calls ' 5': expected a whole number" },
      { { "--clients", "2", "--fleet", "--wave", "1@nan" }, "--wave 1@nan: expected N@SECONDS" },
    } do
      local r = proc.run(proc.concat({ "simulate", policy }, case[1]), { timeout = 60 })
      assert.are.equal(2, r.code, r.stderr)
      assert.matches("luaretry: " .. case[2], r.stderr, 1, true)
    end
    for _, args in ipairs { { "--attempts", "3.0" }, { "--seed", "1e3" }, { "--clients", "1e1", "--outage", "1.5e1" },
                            { "--latency", ".01,1@5e-2", "--calls", "1e2" } } do
      local r = proc.run(proc.concat({ "simulate", policy }, args), { timeout = 60 })
      assert.are.equal(0, r.code, table.concat(args, " ") .. ": " .. r.stderr)
    end
  end)
end)
