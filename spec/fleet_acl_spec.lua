-- An ACL user of the fleet (luaretry(1) --redis, README "Fleet"): Redis 7
-- checks the ACL at every command a script runs, so the user needs the
-- commands the fleet's scripts run, not `@scripting` alone.  The list
-- luaretry(1) gives is held here to the scripts' redis.call (core/fleet/)
-- and to a real redis-server (support.redis: a Unix socket, stopped by its
-- PID): with it, run, `luaretry fleet` and --reset work; without any one
-- of its commands, a run says which and lists them, once per loss, and
-- the local guards decide until Redis is back.  A user allowed @scripting alone was told "EVALSHA
-- refused: ERR The user executing the script can't run this command or
-- subcommand script: SHA, on @user_script:2." for ever (and with a user
-- name of 2 bytes, "EVALSHA refused: ERR" and nothing more).
local proc = require "support.proc"
local redis = require "support.redis"
local fleet = require "support.fleet"

local LOST = "local guards decide until Redis is back"
local BACK = ": back, fleet-wide again"
local PW = "acl-Pw-81q"
local NEEDS = "the fleet's ACL user needs "
local count, new_key = fleet.count, fleet.keys("acl")

-- The commands luaretry(1) lists: its literal ACL SETUSER for a run, then
-- what `luaretry fleet` and --reset add.
local MAN = assert(proc.readfile(proc.root .. "/core/cli/man/luaretry.1"))
local function man_run_list()
  local block = MAN:match("\n%.Bd %-literal[^\n]*\n(ACL SETUSER fleet on .-)\n%.Ed\n")
  assert(block, "luaretry(1) has no literal ACL SETUSER fleet block")
  local t = {}
  for c in block:gmatch("%+([%l]+)") do t[#t + 1] = c end
  return t
end
local ADMIN, RESET = { "zrevrange", "zcount", "hlen" }, { "del" }

-- A policy of its own, run against `false`: every attempt fails, so each
-- run syncs its failures, asks for a block and gives it back.
local function policy(dir)
  local path = dir .. "/acl.lua"
  proc.writefile(path, table.concat({
    'name = "acl"', "max_attempts = 3", "deadline = 30", "attempt_timeout = 5",
    'backoff = { kind = "constant", initial = 0.01, jitter = "none" }',
    "budget = { max_tokens = 1000, token_ratio = 0.1 }", "breaker = { failures = 100 }",
    "fleet = { sync = 50 }", "" }, "\n"))
  return path
end

-- Every word but those of `without`, as ACL SETUSER's +words.
local function plus(lists, without)
  local t = {}
  for _, list in ipairs(lists) do
    for _, c in ipairs(list) do
      if c ~= without then t[#t + 1] = "+" .. c end
    end
  end
  return t
end

describe("an ACL user of the fleet", function ()
  local r, tmp
  redis.with_redis({}, function (x, t) r, tmp = x, t end)

  local users = {}
  local function user(name, rights)
    users[#users + 1] = name
    assert.are.equal("OK", r:cli("ACL", "SETUSER", name, "reset", "on", ">" .. PW, "~luaretry:*",
                                 "-@all", table.unpack(rights)))
    return "unix://" .. name .. ":" .. PW .. "@" .. r.sock
  end
  after_each(function ()
    if #users > 0 then r:cli("ACL", "DELUSER", table.unpack(users)) end
    users = {}
  end)

  local function run(url, key, extra)
    local args = { "run", policy(tmp), "--redis", url, "--set", "fleet.key=" .. key, "--set",
                   "fleet.command_timeout=5000", "--set", "fleet.connect_timeout=5000", "--stats" }
    for _, a in ipairs(extra or {}) do args[#args + 1] = a end
    args[#args + 1] = "--"
    args[#args + 1] = "false"
    return proc.run(args, { timeout = 60 })
  end
  local function look(url, key, ...)
    return proc.run(proc.concat({ "fleet", policy(tmp), "--redis", url, "--set",
                                  "fleet.key=" .. key, "--set", "fleet.command_timeout=5000" },
                                { ... }), { timeout = 60 })
  end
  local function never_shown(...)
    local all = table.concat({ ... }, "\n")
    assert.falsy(all:find(PW, 1, true), all)
  end

  it("needs the commands luaretry(1) lists: those its scripts run, EVALSHA and EVAL, and the message's list is the same", function ()
    local listed, set = man_run_list(), {}
    for _, c in ipairs(listed) do set[c] = true end
    assert.truthy(set.evalsha and set.eval, table.concat(listed, " "))
    -- every command a script runs is listed, and nothing else is
    local ran = {}
    for _, file in ipairs(proc.ls(proc.root .. "/core/fleet")) do
      if file:match("%.c$") then
        local text = assert(proc.readfile(proc.root .. "/core/fleet/" .. file))
        for c in text:gmatch("redis%.call%('(%u+)'") do ran[c:lower()] = true end
      end
    end
    for c in pairs(ran) do assert.truthy(set[c], c .. " is run by a script, not listed") end
    for c in pairs(set) do
      assert.truthy(ran[c] or c == "evalsha" or c == "eval", c .. " is listed, run by no script")
    end
    -- the refusal's list (LR_ACL_RUN), word for word
    local header = assert(proc.readfile(proc.root .. "/core/fleet/fleet_internal.h"))
    local words, at = {}, header:find("#define LR_ACL_RUN", 1, true)
    for line in header:sub(at or #header + 1):gmatch("[^\n]*") do
      for piece in line:gmatch('"([^"]*)"') do words[#words + 1] = piece end
      if not line:find("\\$") then break end -- the macro's last line
    end
    assert.are.equal("+" .. table.concat(listed, " +"), table.concat(words))
    -- and what `luaretry fleet` and --reset add
    assert.truthy(MAN:find(".Ql +zrevrange +zcount +hlen ,", 1, true))
    assert.truthy(MAN:find(".Cm fleet Fl \\-reset\n.Ql +del .", 1, true))
  end)

  it("with them runs the fleet, and with what luaretry(1) adds shows and resets it", function ()
    local key, listed = new_key(), man_run_list()
    local url = user("fleet-run", plus({ listed }))
    r:cli("SCRIPT", "FLUSH") -- EVAL, then EVALSHA
    local x = run(url, key)
    assert.are.equal(4, x.code, x.stderr) -- the 3 attempts
    assert.matches("guards fleet", x.stderr)
    assert.are.equal(0, count(x.stderr, LOST), x.stderr)
    -- looking needs more: said, with what
    local st = look(url, key)
    assert.are.equal(1, st.code, st.stderr)
    assert.matches("ZREVRANGE [^\n]* refused: NOPERM[^\n]*'zrevrange'", st.stderr)
    assert.truthy(st.stderr:find("+zrevrange +zcount +hlen, and +del for --reset", 1, true), st.stderr)
    local url2 = user("fleet-look", plus({ listed, ADMIN }))
    local st2 = look(url2, key)
    assert.are.equal(0, st2.code, st2.stderr)
    assert.matches("\n  budget: [%d.]+ of 1000 tokens", st2.stdout)
    local reset = look(url2, key, "--reset")
    assert.are.equal(1, reset.code, reset.stderr)
    assert.matches("DEL [^\n]* refused: NOPERM[^\n]*'del'", reset.stderr)
    local url3 = user("fleet-admin", plus({ listed, ADMIN, RESET }))
    local reset2 = look(url3, key, "--reset")
    assert.are.equal(0, reset2.code, reset2.stderr)
    assert.are.equal("0", r:cli("EXISTS", "luaretry:{" .. key .. "}"))
    -- a database other than 0: SELECT too
    local db = run(url .. "?db=1", key)
    assert.are.equal(1, count(db.stderr, LOST), db.stderr)
    assert.matches("SELECT refused: NOPERM[^\n]*'select'", db.stderr)
    local url4 = user("fleet-db", plus({ listed, { "select" } }))
    local db2 = run(url4 .. "?db=1", key)
    assert.are.equal(4, db2.code, db2.stderr)
    assert.matches("guards fleet", db2.stderr)
    assert.are.equal(0, count(db2.stderr, LOST), db2.stderr)
    never_shown(x.stderr, st.stderr, st2.stdout, reset.stderr, db.stderr, db2.stderr)
  end)

  it("without any one of them: the run says which and lists them, once per loss, and the local guards decide until Redis is back", function ()
    local listed = man_run_list()
    for _, c in ipairs(listed) do
      local key = new_key()
      local url = user("fleet-no-" .. c, plus({ listed }, c))
      r:cli("SCRIPT", "FLUSH") -- so that EVAL is asked for too
      local x = run(url, key)
      assert.are.equal(4, x.code, c .. ": " .. x.stderr) -- the local guards' 3 attempts
      -- A command a script runs only now and then (ZREM) lets a later
      -- sync through, and the fleet is back until one needs it again: a
      -- slow run (beside load, final38: 0.4 s) sees that, a quick one ends
      -- before Redis is asked again.  Each loss and each return is said
      -- once, in turn, and the stats' guards are those of the last.
      local lost, back = count(x.stderr, LOST), count(x.stderr, BACK)
      assert.is_true(lost >= 1 and (lost == back or lost == back + 1), c .. ": " .. x.stderr)
      assert.matches(lost > back and "guards fallback" or "guards fleet", x.stderr)
      -- named: by Redis's words (EVALSHA, EVAL themselves), or from the
      -- script's line Redis 7.0 names
      local named = x.stderr:find("to run the '" .. c .. "' command (" .. NEEDS, 1, true) or
                    x.stderr:find("subcommand (" .. c:upper() .. ": " .. NEEDS, 1, true)
      assert.truthy(named, c .. ": " .. x.stderr)
      assert.truthy(x.stderr:find(NEEDS .. "+" .. table.concat(listed, " +"), 1, true), x.stderr)
      -- never the script's SHA and line: noise, once the command is named
      assert.falsy(x.stderr:find("@user_script", 1, true), x.stderr)
      never_shown(x.stderr)
    end
  end)

  it("allowed @scripting alone, with a user name of 2 bytes: Redis's words are shown, the command named, the password not", function ()
    local url = user("lr", { "+@scripting" })
    r:cli("SCRIPT", "FLUSH")
    local x = run(url, new_key())
    assert.are.equal(4, x.code, x.stderr)
    assert.are.equal(1, count(x.stderr, LOST), x.stderr)
    assert.truthy(x.stderr:find("EVAL refused: ERR The user executing the script can't run this " ..
                                "command or subcommand (TIME: " .. NEEDS, 1, true), x.stderr)
    never_shown(x.stderr)
  end)
end)
