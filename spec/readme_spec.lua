-- README.md says what it shows: its policy example and that example's spec
-- run as printed, and every `$ luaretry ...` transcript is what the command
-- prints now (a line "..." stands for lines left out, a line ending in
-- " ..." for one cut short).  A change to
-- the product that leaves the README behind fails here.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
local proc = require "support.proc"
local q = proc.q

local README = assert(proc.readfile(proc.root .. "/README.md"))
-- the commands run in a folder of their own: absolute paths
local ROOT = proc.readfile_cmd("cd " .. q(proc.root) .. " && pwd"):gsub("\n$", "")
local BIN = proc.bin:sub(1, 1) == "/" and proc.bin or ROOT .. "/" .. proc.bin:gsub("^%./", "")

-- The fenced blocks of the README, in order: { lang =, lines = {...} }.
local function blocks()
  local out, cur = {}, nil
  for line in (README .. "\n"):gmatch("([^\n]*)\n") do
    if cur then
      if line:match("^```%s*$") then
        out[#out + 1] = cur
        cur = nil
      else
        cur.lines[#cur.lines + 1] = line
      end
    else
      local lang = line:match("^```(%w*)%s*$")
      if lang then cur = { lang = lang, lines = {} } end
    end
  end
  return out
end

-- The block whose first line is `first`, as text.
local function block_starting(first)
  for _, b in ipairs(blocks()) do
    if b.lines[1] == first then return table.concat(b.lines, "\n") .. "\n" end
  end
  error("README.md has no block starting with " .. first)
end

-- Every transcript: { command = "luaretry ...", expected = { lines } }.
local function transcripts()
  local out = {}
  for _, b in ipairs(blocks()) do
    local cur
    for _, line in ipairs(b.lines) do
      local cmd = line:match("^%$ (luaretry .*)$")
      if cmd then
        cur = { command = cmd, expected = {} }
        out[#out + 1] = cur
      elseif cur then
        cur.expected[#cur.expected + 1] = line
      end
    end
  end
  return out
end

-- A folder holding the README's orders.lua, with policies/ and spec/ of
-- the tree beside it, as the transcripts assume.
local function workdir()
  local dir = proc.tmpdir()
  proc.writefile(dir .. "/orders.lua", block_starting("-- orders.lua: our orders service, behind a gateway that sheds load."))
  proc.writefile(dir .. "/orders_spec.lua", block_starting("-- orders_spec.lua"))
  proc.writefile(dir .. "/ours.lua", block_starting("-- ours.lua: http's rules, our limits, and teapots are final"))
  assert(proc.sh("ln -s " .. q(ROOT .. "/policies") .. " " .. q(dir .. "/policies") ..
                 " && ln -s " .. q(ROOT .. "/spec") .. " " .. q(dir .. "/spec")) == 0)
  return dir
end

describe("README.md", function()
  local dir
  setup(function() dir = workdir() end)
  teardown(function() if dir then proc.rmtree(dir) end end)

  it("its orders_spec.lua passes against its orders.lua, as its command line runs it", function()
    local spec = block_starting("-- orders_spec.lua")
    local its = select(2, spec:gsub("\n%s*it%(", ""))
    assert.is_true(its >= 5)
    local out = dir .. "/busted.out"
    local code = proc.sh("cd " .. q(dir) .. " && busted --lua=lua5.4 --cpath=" ..
                         q(ROOT .. "/build/?.so") .. " --lpath=" .. q(ROOT .. "/lua/?.lua") ..
                         " -o plainTerminal orders_spec.lua >" .. q(out) .. " 2>&1")
    local text = proc.readfile(out) or ""
    assert.are.equal(0, code, text)
    assert.matches(its .. " successes / 0 failures / 0 errors", text)
  end)

  -- it introduces; the reference is the man pages
  it("is at most 400 lines", function()
    local n = select(2, README:gsub("\n", ""))
    assert.is_true(n <= 400, n .. " lines")
  end)

  local list = transcripts()
  it("has transcripts", function() assert.is_true(#list >= 5) end)
  for _, t in ipairs(list) do
    -- a transcript against a Redis of its own is spec/fleet_spec.lua's
    if t.command:find("--redis", 1, true) then
      pending("`" .. t.command .. "` needs a Redis: spec/fleet_spec.lua runs luaretry fleet")
      goto continue
    end
    it("shows what `" .. t.command .. "` prints", function()
      local args = {}
      -- words as a shell splits them: blanks, and '...' quoting a word
      local s = t.command
      while true do
        s = s:gsub("^%s+", "")
        if s == "" then break end
        local word, rest = s:match("^'([^']*)'(.*)$")
        if not word then word, rest = s:match("^(%S+)(.*)$") end
        args[#args + 1] = q(word)
        s = rest
      end
      args[1] = q(BIN)
      local out = dir .. "/cmd.out"
      proc.sh("cd " .. q(dir) .. " && " .. table.concat(args, " ") .. " >" .. q(out) .. " 2>&1")
      local got = {}
      for line in ((proc.readfile(out) or "") .. "\n"):gmatch("([^\n]*)\n") do got[#got + 1] = line end
      -- each line shown, in order; "..." skips any number of lines
      local at = 1
      for _, want in ipairs(t.expected) do
        if not want:match("^%s*%.%.%.%s*$") then
          local found
          local prefix = want:match("^(.-) %.%.%.$")  -- "text ...": a line cut short
          for i = at, #got do
            if got[i] == want or (prefix and got[i]:sub(1, #prefix) == prefix) then
              found = i
              break
            end
          end
          assert(found, ("README shows %q, which `%s` no longer prints in that order; it prints:\n%s")
                        :format(want, t.command, table.concat(got, "\n")))
          at = found + 1
        end
      end
    end)
    ::continue::
  end
end)
