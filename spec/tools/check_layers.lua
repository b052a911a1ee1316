-- spec/tools/check_layers.lua: the layer rules of core/, checked.
--
--   lua5.4 spec/tools/check_layers.lua CORE_DIR [OBJECT.o ...]
--
-- 1. What each folder may include.  A quoted include names a header of
--    the same folder, of include/ (the public headers), or "folder/x.h";
--    the table below says which folders each may reach, and whether it
--    may see Lua's headers, libcurl's or hiredis's.
-- 2. No cycles between the library's files: from `nm` on the objects
--    given, file A depends on file B when A uses a symbol B defines; any
--    loop (A -> B -> ... -> A) is reported.
-- 3. The guards' unit (engine/guard_*.c, one guard each behind
--    lr_guard_ops, asked in order by engine/chain.c): no guard file uses a
--    symbol another guard file defines, so no two guards call into each
--    other and none reaches the chain (a circle through chain.c is a loop
--    of rule 2).
-- Exit status 0 when all hold, 1 with one line per breach.

-- The sandbox is the metered Lua VM both policies and the fault server run
-- in: it reaches nothing above the engine.  The policy layer owns a
-- policy's settings and lifetime: it makes the fleet's handle and plugs it
-- into the engine's guards (fleet/remote_guard.h).
local RULES = {
  include = { reach = { include = true }, lua = false, curl = true },
  engine  = { reach = { include = true, engine = true }, lua = false, curl = false },
  sandbox = { reach = { include = true, engine = true, sandbox = true }, lua = true, curl = false },
  policy  = { reach = { include = true, engine = true, sandbox = true, policy = true, fleet = true },
              lua = true, curl = false },
  http    = { reach = { include = true, http = true }, lua = false, curl = true },
  fleet   = { reach = { include = true, engine = true, fleet = true }, lua = false, curl = false,
              redis = true },
  module  = { reach = { include = true, module = true }, lua = true, curl = false },
  cli     = { reach = { include = true, cli = true, faults = true }, lua = false, curl = true },
  faults  = { reach = { faults = true, sandbox = true, engine = true }, lua = true, curl = false },
}
-- luaretry.h is what hosts without curl include: it must not pull curl in.
local CURL_FREE = { ["include/luaretry.h"] = true }

local LUA_HEADERS = { ["lua.h"] = true, ["lauxlib.h"] = true, ["lualib.h"] = true,
                      ["luaconf.h"] = true }

local core = assert(arg[1], "usage: check_layers.lua CORE_DIR [OBJECT.o ...]")
local breaches = {}
local function breach(fmt, ...) breaches[#breaches + 1] = fmt:format(...) end

local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end

local function list(cmd)
  local out = {}
  local p = assert(io.popen(cmd))
  for line in p:lines() do out[#out + 1] = line end
  p:close()
  return out
end

-- The folder a quoted include reaches from `folder` (a file in `dir`, a
-- wing such as cli/run/ belonging to its top folder), or nil and why.
local function folder_of(folder, dir, name)
  local top = name:match("^([%w_]+)/")
  if top then
    if RULES[top] then return top end
    return nil, "names no folder of core/"
  end
  if exists(dir .. "/" .. name) then return folder end
  if exists(core .. "/include/" .. name) then return "include" end
  return nil, "is not in the folder nor in include/"
end

local function check_include(file, folder, rule, lineno, quoted, name)
  local dir = file:match("^(.*)/[^/]*$")
  local where = ("%s:%d"):format(file, lineno)
  if LUA_HEADERS[name] then
    if not rule.lua then breach("%s: %s may not include Lua's %s", where, folder, name) end
    return
  end
  if name == "hiredis.h" or name:match("^hiredis/") then
    if not rule.redis then breach("%s: %s may not include hiredis's %s", where, folder, name) end
    return
  end
  if name:match("^curl/") then
    local rel = file:sub(#core + 2)
    if not rule.curl or CURL_FREE[rel] then
      breach("%s: %s may not include libcurl's %s", where, CURL_FREE[rel] and rel or folder, name)
    end
    return
  end
  if not quoted then return end  -- the C library and the system
  local target, why = folder_of(folder, dir, name)
  if not target then
    breach("%s: \"%s\" %s", where, name, why)
  elseif not rule.reach[target] then
    breach("%s: %s may not include %s's \"%s\"", where, folder, target, name)
  end
end

local function check_file(file)
  local folder = file:sub(#core + 2):match("^([^/]+)/")
  local rule = folder and RULES[folder]
  if not rule then
    breach("%s: not in a folder of core/ with rules (%s)", file, "include engine sandbox policy http fleet module cli faults")
    return
  end
  local lineno = 0
  for line in io.lines(file) do
    lineno = lineno + 1
    local q = line:match('^%s*#%s*include%s*"([^"]+)"')
    local a = line:match("^%s*#%s*include%s*<([^>]+)>")
    if q or a then check_include(file, folder, rule, lineno, q ~= nil, q or a) end
  end
end

for _, file in ipairs(list("find " .. core .. " -name '*.[ch]' | sort")) do check_file(file) end

-- Cycles between object files, by the symbols they define and use.
local objects = { table.unpack(arg, 2) }
if #objects > 0 then
  local defined, uses = {}, {}
  for _, o in ipairs(objects) do
    uses[o] = {}
    for _, line in ipairs(list("nm " .. o)) do
      local kind, sym = line:match("^%s*%x*%s+(%a)%s+(%S+)$")
      if kind == "U" then uses[o][#uses[o] + 1] = sym
      elseif kind and kind:match("[TDBR]") then defined[sym] = o end
    end
  end
  local edges = {}
  for o, syms in pairs(uses) do
    edges[o] = {}
    for _, sym in ipairs(syms) do
      local d = defined[sym]
      if d and d ~= o then edges[o][d] = sym end
    end
  end
  -- the guards' unit: a guard file reaches no other guard file
  local function guard(o) return o:match("engine/(guard_[%w_]+)%.o$") end
  for o, ds in pairs(edges) do
    for d, sym in pairs(ds) do
      if guard(o) and guard(d) then
        breach("the guards' unit: engine/%s uses engine/%s (%s): each guard stands alone, "
               .. "engine/chain.c asks them in order", guard(o), guard(d), sym)
      end
    end
  end
  -- depth-first search; a grey node reached again closes a loop
  local state, stack = {}, {}
  local function visit(o)
    state[o] = "grey"
    stack[#stack + 1] = o
    local targets = {}
    for d in pairs(edges[o]) do targets[#targets + 1] = d end
    table.sort(targets)
    for _, d in ipairs(targets) do
      if state[d] == "grey" then
        local loop, on = {}, false
        for _, s in ipairs(stack) do
          if s == d then on = true end
          if on then loop[#loop + 1] = s:match("([^/]+/[^/]+)%.o$") or s end
        end
        loop[#loop + 1] = d:match("([^/]+/[^/]+)%.o$") or d
        breach("a loop between files: %s (%s uses %s)", table.concat(loop, " -> "),
               o:match("([^/]+/[^/]+)%.o$") or o, edges[o][d])
      elseif not state[d] then
        visit(d)
      end
    end
    stack[#stack] = nil
    state[o] = "black"
  end
  table.sort(objects)
  for _, o in ipairs(objects) do
    if not state[o] then visit(o) end
  end
end

for _, b in ipairs(breaches) do io.stderr:write("check-layers: ", b, "\n") end
if #breaches > 0 then os.exit(1) end
print(("check-layers: %s: every include within its layer%s"):format(core,
      #objects > 0 and (", no loop between " .. #objects .. " files") or ""))
