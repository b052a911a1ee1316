-- The sandbox's own string.find, match, gmatch and gsub (core/sandbox/lpattern.c):
-- the same results and errors as Lua 5.4's, and stopped by the
-- instruction limit where Lua's would run for minutes.
local lr = require "luaretry"

local text = require "support.text"
local has = text.has

-- Runs `code` as the body of a function at the top of a script in the
-- sandbox; the script reports the function's result by failing its load.
local function inside(code, opts)
  local p, msg = lr.load_string("max_attempts = 1\nerror(tostring((function() "
                                .. code .. "\nend)()), 0)", "=probe", opts)
  assert.is_nil(p, "the probe was expected to report through its error")
  return msg
end

-- ---- differential cases: generated here, run by stock Lua and in the sandbox

-- The code both sides run: replacements by number, a serializer that keeps
-- integers, floats and strings apart, and one case runner.
local EVAL = [==[
local R = {
  "x", "%0", "<%1>", "%2%1", "%%", "%", "a%xb", "", "[%3]", "%1%1", 7, 2.5,
  { a = "A", b = false, ab = 1, [" "] = "_", x = 2.5, c = {}, ["("] = "{" },
  function(...) return select('#', ...) end,
  function(_, b) return b end,
  function(a) if a == "a" then return false end return "<" .. tostring(a) .. ">" end,
  function() return {} end,
  function() error("boom", 0) end,
  function(...)
    local t = {}
    for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end
    return table.concat(t, ",")
  end,
  true,
  setmetatable({}, { __index = function(_, k) return type(k) == "string" and #k or nil end }),
}

local function ser(...)
  local out = {}
  for i = 1, select('#', ...) do
    local v = select(i, ...)
    local t = type(v)
    if t == "string" then out[i] = "s" .. string.format("%q", v)
    elseif t == "number" then out[i] = (math.type(v) == "integer" and "i" or "f") .. string.format("%q", v)
    else out[i] = t .. ":" .. tostring(v) end
  end
  return select('#', ...) .. "(" .. table.concat(out, ",") .. ")"
end

local function call(c)
  local name, n = c[1], c.n
  if name == "gmatch" then
    local it = string.gmatch(table.unpack(c, 2, n))
    local out = {}
    for _ = 1, 100 do
      local r = table.pack(it())
      out[#out + 1] = ser(table.unpack(r, 1, r.n))
      if r[1] == nil then break end
    end
    out[#out + 1] = ser(it())
    return table.concat(out, ";")
  end
  if c.method then
    local s = c[2]
    return ser(s[name](s, table.unpack(c, 3, n)))
  end
  return ser(string[name](table.unpack(c, 2, n)))
end

local function run(c) return ser(pcall(call, c)) end
]==]

local seed = 0x5eed
local function rnd(n)  -- 1..n, a fixed 64-bit LCG: busted's own seeding cannot move it
  seed = seed * 6364136223846793005 + 1442695040888963407
  return ((seed >> 33) % n) + 1
end
local function pick(t) return t[rnd(#t)] end

local SUBJECT_CHARS = { "a", "a", "a", "b", "b", "c", "x", "z", " ", " ", "1", "9", "A", "Z", "_",
                        "(", ")", "[", "]", "%", "-", ".", '"', "'", "\n", "\t", "\0", "\200",
                        "\255", "^", "$", "*", "+", "?", "=" }
local SUBJECTS = { 'key = value; x=(a(b)c) "q" ', "THE (quick) [brown] fox", "aaaa", "abab",
                   "  12.5e3 -7 0x1F ", '{"status": "ABORTED", "code": 409}', "a.b.c",
                   "((a)(b))", "hello world from Lua" }

local function subject()
  if rnd(5) == 1 then return pick(SUBJECTS) end
  local t = {}
  for i = 1, rnd(25) - 1 do t[i] = pick(SUBJECT_CHARS) end
  return table.concat(t)
end

local LITERALS = { "a", "b", "c", "x", " ", "1", "A", "=", '"', "z", "]", "\0", "\200" }
local CLASSES = { "%a", "%c", "%d", "%g", "%l", "%p", "%s", "%u", "%w", "%x", "%A", "%C", "%D",
                  "%G", "%L", "%P", "%S", "%U", "%W", "%X", "%z", "%Z", "." }
local ESCAPES = { "%(", "%)", "%.", "%%", "%+", "%-", "%*", "%?", "%[", "%]", "%^", "%$", "% ", "%=" }
local MEMBERS = { "a", "b-d", "%d", "%s", "-", "x-", "%]", "%-", "^", "A-Z", "\0", "%a", "%W",
                  "(", ".", "z-a", "]-a" }
local BALANCED = { "%b()", '%b""', "%bab", "%bxx", "%b[]" }
local FRONTIERS = { "%f[%w]", "%f[%W]", "%f[a-c]", "%f[^a]", "%f[%z]", "%f[%s]", "%f[\0]" }
local BROKEN = { "%", "[ab", "[^", "[%", "%b", "%bx", "%f", "%fa", ")", "(", "%0", "%9", "[]" }
local QUANTIFIERS = { "", "", "", "*", "+", "-", "?" }

local pattern_of
local function item(depth)
  local k = rnd(20)
  if k <= 5 then return pick(LITERALS) .. pick(QUANTIFIERS)
  elseif k <= 8 then return pick(CLASSES) .. pick(QUANTIFIERS)
  elseif k <= 9 then return pick(ESCAPES) .. pick(QUANTIFIERS)
  elseif k <= 12 then
    local m = { rnd(4) == 1 and "^" or "" }
    if rnd(6) == 1 then m[#m + 1] = "]" end
    for _ = 1, rnd(3) do m[#m + 1] = pick(MEMBERS) end
    return "[" .. table.concat(m) .. "]" .. pick(QUANTIFIERS)
  elseif k <= 15 and depth > 0 then return "(" .. pattern_of(depth - 1, rnd(3)) .. ")"
  elseif k == 16 then return "()"
  elseif k == 17 then return pick(BALANCED)
  elseif k == 18 then return pick(FRONTIERS)
  elseif k == 19 then return "%" .. rnd(3)
  else return rnd(2) == 1 and "$" or "^" end  -- in the middle: plain characters
end

function pattern_of(depth, n)
  local t = {}
  for i = 1, n do t[i] = item(depth) end
  return table.concat(t)
end

local function pattern()
  local p = pattern_of(2, rnd(4))
  if rnd(4) == 1 then p = "^" .. p end
  if rnd(5) == 1 then p = p .. "$" end
  if rnd(12) == 1 then p = p .. pick(BROKEN) end
  return p
end

local INITS = { 1, 2, 3, 5, 10, 0, -1, -2, -5, -30, 30, 1000, math.mininteger, math.maxinteger,
                1.0, "2", 1.5 }
local function init() if rnd(3) == 1 then return nil end return pick(INITS) end

-- A value as Lua source text.
local function src(v)
  if type(v) == "string" or type(v) == "number" then return string.format("%q", v) end
  if type(v) == "table" then return "{}" end
  return tostring(v)
end

local function case_source(name, args, opts)
  local t = { src(name) }
  for i = 1, #args.v do t[#t + 1] = args.v[i] end
  local s = "{" .. table.concat(t, ",") .. ",n=" .. (#args.v + 1)
  if opts and opts.method then s = s .. ",method=true" end
  return s .. "}"
end

local function args(...)
  local v = {}
  for i = 1, select('#', ...) do v[i] = src((select(i, ...))) end
  return { v = v }
end

-- The replacement, by index into R, as source text.
local function repl_arg(a)
  local k = rnd(23)
  if k <= 19 then a.v[#a.v + 1] = "R[" .. k .. "]"
  elseif k == 20 then a.v[#a.v + 1] = src(pick{ "-", "%1-%0", "%2", "()" })
  elseif k == 21 then a.v[#a.v + 1] = "nil"
  else a.v[#a.v + 1] = "R[" .. pick{ 13, 14, 15, 19, 21 } .. "]" end
  local m = rnd(8)
  if m == 1 then a.v[#a.v + 1] = src(pick{ 0, 1, 2, -1, 2.0, 1.5, "3" }) end
end

local function generate(count)
  local cases = {}
  for i = 1, count do
    local fn = pick{ "find", "find", "match", "match", "gmatch", "gsub", "gsub" }
    local s, p = subject(), pattern()
    if rnd(40) == 1 then s = pick{ 12345, 3.25, -7 } end
    if rnd(60) == 1 then p = pick{ 2, 1.5 } end
    local a = args(s, p)
    if fn == "find" then
      a.v[3] = src(init())
      if rnd(3) == 1 then a.v[4] = src(pick{ true, false, 1, "yes" }) end
      if rnd(4) == 1 then  -- literal text in the subject, pattern characters or not
        local from = rnd(#tostring(s) + 1)
        a.v[2] = src(tostring(s):sub(from, from + rnd(4) - 1))
      end
    elseif fn == "match" or fn == "gmatch" then
      a.v[3] = src(init())
    else
      repl_arg(a)
    end
    cases[i] = case_source(fn, a, { method = type(s) == "string" and rnd(5) == 1 })
  end
  return cases
end

-- Cases at the edges, written out.
local function edge_cases()
  local c = {}
  local function add(...) c[#c + 1] = case_source(...) end
  for n = 190, 205 do  -- "pattern too complex" exactly where Lua says it
    add("find", args(("a"):rep(n), ("a?"):rep(n)))
    add("match", args(("a"):rep(n), ("(a"):rep(16) .. ("a?"):rep(n - 17)))
    add("find", args(("a"):rep(n), ("a?"):rep(n) .. "$"))
    add("match", args(("ab"):rep(n), ("%w?"):rep(n // 2) .. ("(%w?)"):rep(5) .. "()"))
  end
  for n = 30, 34 do
    add("find", args(("x"):rep(40), ("()"):rep(n)))
    add("match", args(("x"):rep(40), ("(x)"):rep(n)))
    add("gsub", args(("x"):rep(40), ("(x)"):rep(n), "%9"))
  end
  for _, p in ipairs{ "%", "[a", "[a%", "[%", "[^", "[]", "[^]", "[]]", "[^]]", "[]-a]", "[a-]",
                      "[-a]", "[%]]", "[%a-z]", "a)", "(a", "(()", "%1", "(a)%2", "%0", "(a%1)",
                      "%f", "%fa", "%f[a", "%b", "%ba", "%b()", "^$", "$", "^", "", "$a", "a$$",
                      "^^a", "%$", "x*$", "[\0-\1]", "\0", "%z", "[%z]", "%Z+", "(%d+)-(%d+)",
                      "((a)(b))%2%3", "()a()", "(a*(.)%w(%s*))", "%bxy", "%b\0\1", ".-$", "(.-)%1",
                      "()%1", "(x)%1", "%f[%w]%w+%f[%W]" } do
    for _, s in ipairs{ "", "a", "ab]", "(a)b", "xx a-b\0\1 10-20 ", "aba" } do
      add("find", args(s, p))
      add("find", args(s, p, 2))
      add("find", args(s, p, 1, true))
      add("match", args(s, p))
      add("gmatch", args(s, p))
      add("gsub", args(s, p, "<%0>"))
    end
  end
  -- arguments: types, missing ones, numbers where strings go
  add("find", args(nil, "x"))
  add("find", args("x", {}))
  add("find", { v = { src("x") } })
  add("match", args("x", "x", {}))
  add("gsub", args("abc", "b"))
  add("gsub", args("abc", "b", "x", "x"))
  add("gsub", args(123, "2", "x"))
  add("gsub", args(123, "9", "x"))
  add("gsub", args(12.5, "%.", "x"))
  add("find", args(125, 2))
  add("match", args(3.0, "%d+"))
  add("gmatch", args("abc", "()", 4))
  add("gmatch", args("abc", "()", 5))
  add("gmatch", args("abc", "", -1))
  add("gmatch", args("a^b^", "^b"))
  add("gsub", args("hello world", "%w+", "%0 %0", 1))
  add("gsub", args("abc", "", "-"))
  add("gsub", args("abc", "^", ">"))
  add("gsub", args("abc", "$", "<"))
  add("gsub", args("abc", ".-", "x"))
  add("gsub", args("abc", "b*", "-"))
  add("gsub", args("a,b,,c", "[^,]*", "[%0]"))
  add("gsub", args("abc", "%w", "%1"))
  add("gsub", args("abc", "%w", "%2"))
  add("gsub", args("abc", "(%w)", "%0%1%%"))
  add("gsub", args("abc", "()", "%1"))
  add("gsub", args("abc", "(", "x"))
  add("gsub", args("abc", "b", "%"))
  add("find", args("a.b", ".", 1, true))
  add("find", args("a.b", "", 4, true))
  add("find", args("a.b", "", 5, true))
  add("find", args("a]b", "]"))
  add("find", args("a)b", ")"))
  return c
end

local function run_stock(cases)
  -- named and laid out as inside() does, so that messages with a position
  -- ("probe:47: bad argument ...") read the same on both sides
  local f = assert(load("\n" .. EVAL .. "\nlocal CASES = {" .. table.concat(cases, ",\n") .. "}\n"
                        .. "local out = {} for i = 1, #CASES do out[i] = run(CASES[i]) end return out",
                        "=probe"))
  return f()
end

-- Runs the cases in one load in the sandbox, which compares each result
-- with stock's and reports "ok N" or its first differences.
local function run_sandbox(cases, expected)
  local exp = {}
  for i, e in ipairs(expected) do exp[i] = string.format("%q", e) end
  local code = EVAL .. "\nlocal CASES = {" .. table.concat(cases, ",\n") .. "}\n"
    .. "local EXPECTED = {" .. table.concat(exp, ",\n") .. "}\n"
    .. [[
      local bad = {}
      for i = 1, #CASES do
        local got = run(CASES[i])
        if got ~= EXPECTED[i] and #bad < 3 then
          bad[#bad + 1] = "case " .. i .. ": got " .. got .. " want " .. EXPECTED[i]
        end
      end
      if #bad > 0 then return table.concat(bad, "\n") end
      return "ok " .. #CASES
    ]]
  return inside(code)
end

local function check_batches(cases)
  local n = 0
  for first = 1, #cases, 400 do
    local batch = table.move(cases, first, math.min(first + 399, #cases), 1, {})
    local expected = run_stock(batch)
    local report = run_sandbox(batch, expected)
    if report ~= "ok " .. #batch then
      error("batch at " .. first .. ":\n" .. report .. "\n" .. batch[tonumber(report:match("^case (%d+)")) or 1], 0)
    end
    n = n + #batch
  end
  return n
end

describe("the sandbox's pattern functions", function()
  it("are the same functions as string.X and as string methods", function()
    assert.are.equal("true true true true",
      inside("local t = {} for i, n in ipairs{ 'find', 'match', 'gmatch', 'gsub' } do "
             .. "t[i] = tostring(string[n] == getmetatable('').__index[n] and ('x')[n] == string[n]) end "
             .. "return table.concat(t, ' ')"))
  end)

  it("agree with stock Lua 5.4 on 6000 generated cases and the edge cases", function()
    local cases = generate(6000)
    local edges = edge_cases()
    for _, c in ipairs(edges) do cases[#cases + 1] = c end
    local n = check_batches(cases)
    assert.are.equal(6000 + #edges, n)
  end)

  it("agree on gsub's replacements: strings, tables, functions and max n", function()
    local cases = {}
    local SUBJ = { "hello world from Lua", "a,b,,c", "x = 1, y = 22", "(a(b)c)", "", "aaa" }
    local PATS = { "%w+", "(%w+)", "(%w)(%w*)", "()", "", "%s*", "(h)(e)", "a", "(a)", "%b()", "x" }
    for _, s in ipairs(SUBJ) do
      for _, p in ipairs(PATS) do
        for r = 1, 21 do
          for _, n in ipairs{ "nil", "0", "1", "2", "-1" } do
            local a = args(s, p)
            a.v[3] = "R[" .. r .. "]"
            a.v[4] = n
            cases[#cases + 1] = case_source("gsub", a)
          end
        end
      end
    end
    assert.are.equal(#cases, check_batches(cases))
  end)
end)

-- ---- the limits: time by default, instructions when the host asks

local BODY = ("a"):rep(64 * 1024)

local function policy(src)
  return assert(lr.load_string("max_attempts = 3\n" .. src, "=probe"))
end

local function timed(f)
  local t = os.clock()
  local r = f()
  return r, os.clock() - t
end

describe("a pattern that backtracks without end", function()
  local CALLS = {
    find = 'return body:find(".-.-.-b") ~= nil',
    match = 'return string.match(body, ".-.-.-b") ~= nil',
    gmatch = 'for _ in body:gmatch(".-.-.-b") do end return true',
    gsub = 'return select(2, body:gsub(".-.-.-b", "")) > 0',
    greedy = 'return body:find(".*.*.*b") ~= nil',
    balanced = 'return body:find("%b()") ~= nil',
    backref = 'return body:find("(.-)%1%1b") ~= nil',
    plain = 'local n = ("a"):rep(300) .. "b" for i = 1, 1e6 do body:find(n, 1, true) end return true',
  }
  for name, call in pairs(CALLS) do
    it("is stopped by the time limit: " .. name, function()
      local p = policy("function is_transient(status, body)\n  if status == 1 then\n    "
                       .. call .. "\n  end\n  return true\nend")
      local body = name == "balanced" and ("("):rep(64 * 1024) or BODY
      local d, secs = timed(function() return p:classify{ status = 1, body = body } end)
      assert.are.equal("policy_error", d.verdict)
      has(d.message, "time limit reached")
      has(d.message, "probe:4")
      assert.is_true(secs < 2, name .. " took " .. secs .. " s")  -- wide: a busy machine
      assert.are.equal("retry", p:classify{ status = 503, body = body }.verdict)
    end)
  end

  it("stays stopped: pcall in the script cannot swallow it", function()
    local p = policy([[
      function is_transient(status, body)
        if status == 1 then
          for i = 1, 100 do pcall(string.find, body, ".-.-.-b") end
          return true
        end
        if status == 2 then
          local ok, err = pcall(function() return body:gsub(".-.-.-b", "x") end)
          for i = 1, 1e9 do end  -- would finish if the kill were not sticky
          return true
        end
        return true
      end
    ]])
    for _, status in ipairs{ 1, 2 } do
      local d, secs = timed(function() return p:classify{ status = status, body = BODY } end)
      assert.are.equal("policy_error", d.verdict)
      has(d.message, "time limit reached")
      assert.is_true(secs < 2, "took " .. secs .. " s")  -- wide: a busy machine
      assert.are.equal("retry", p:classify{ status = 503, body = BODY }.verdict)
    end
  end)

  it("is stopped at load too, and by a lower limit sooner", function()
    local p, err = lr.load_string("max_attempts = 1\nlocal s = ('a'):rep(20000)\nlocal x = s:match('.-.-b')",
                                  "=top")
    assert.is_nil(p)
    has(err, "top:3: time limit reached")
    local q = assert(lr.load_string("max_attempts = 3\nfunction is_transient(_, b) return b:find('.-.-b') ~= nil end",
                                    "=low", { instruction_limit = 10000 }))
    local d, secs = timed(function() return q:classify{ status = 503, body = ("a"):rep(2000) } end)
    has(d.message, "instruction limit reached (10000 instructions)")
    assert.is_true(secs < 1, "took " .. secs .. " s")  -- wide: a busy machine
  end)

  it("does not let a gsub callback's instructions be handed back", function()
    local p = assert(lr.load_string([[
      max_attempts = 3
      function is_transient(_, body)
        body:gsub(".", function() for i = 1, 200 do end end)
        return true
      end
    ]], "=probe", { instruction_limit = 5000000, time_limit = 60 }))
    -- (the time limit far off: on a busy machine 0.25 s came first)
    local d = p:classify{ status = 503, body = BODY }
    assert.are.equal("policy_error", d.verdict)
    has(d.message, "instruction limit reached")
  end)
end)

describe("ordinary patterns on a 64 KiB body", function()
  local filler = ('{"id": 12, "note": "lorem ipsum dolor sit amet"}, '):rep(1300)
  local body = "[" .. filler .. '{"status" : "ABORTED", "code": 409}]'
  body = body .. (" "):rep(64 * 1024 - #body)
  assert(#body == 64 * 1024)

  it("work within the default limit and give stock's answers", function()
    local p = policy([[
      local answers
      function is_transient(status, body)
        answers = {
          body:match('"status"%s*:%s*"(%u+)"'),
          select(2, body:gsub("%s+", " ")),
          select(2, body:gsub('"(%w+)":', "%1=")),
          (function() local n = 0 for w in body:gmatch("%f[%w]%w+") do n = n + 1 end return n end)(),
          body:find("ABORTED", 1, true),
          body:find('(%u+)", "code"'),
          #body:match("^%[(.-)%]"),
          body:find("%d+}%]"),
        }
        error(table.concat(answers, ","), 0)
      end
    ]])
    local d, secs = timed(function() return p:classify{ status = 503, body = body } end)
    local n = 0
    for _ in body:gmatch("%f[%w]%w+") do n = n + 1 end
    local want = table.concat({
      body:match('"status"%s*:%s*"(%u+)"'), select(2, body:gsub("%s+", " ")),
      select(2, body:gsub('"(%w+)":', "%1=")), n, body:find("ABORTED", 1, true),
      body:find('(%u+)", "code"'), #body:match("^%[(.-)%]"), body:find("%d+}%]") }, ",")
    assert.are.equal("policy_error", d.verdict)
    assert.are.equal("is_transient: " .. want, d.message)
    assert.is_true(secs < 2, "took " .. secs .. " s")  -- wide: a busy machine
  end)
end)
