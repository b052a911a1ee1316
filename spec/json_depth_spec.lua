-- json.decode in a policy's sandbox refuses a document nested deeper than
-- 256 levels with nil, position, message (as dkjson refuses bad JSON), so a
-- server's 20,000 `[` no longer spend the memory limit, an error no pcall
-- catches.  Brackets in strings and comments do not count.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
package.path = here .. "/?.lua;" .. package.path
local proc = require "support.proc"

local POLICY = [[
name = "json-depth"
max_attempts = 3
deadline = 10
-- retry: decoded (and as deep as the body says); final: refused as too deep
function is_transient(status, body, info)
  if not info.headers["x-depth"] then return false end  -- check's own probes
  local ok, v, pos, err = pcall(json.decode, body)
  if not ok then error("raised: " .. tostring(v)) end
  if v == nil then
    if tostring(err):find("nested deeper than 256 levels", 1, true) and math.type(pos) == "integer" then
      return false
    end
    error("unexpected: " .. tostring(err))
  end
  local depth = 0
  while type(v) == "table" do depth, v = depth + 1, v[1] or v.k end
  return depth == tonumber(info.headers["x-depth"])
end
]]

local dir, file
setup(function()
  dir = proc.tmpdir()
  file = dir .. "/json_depth.lua"
  proc.writefile(file, POLICY)
end)
teardown(function() proc.rmtree(dir) end)

local function nested(n) return ("["):rep(n) .. ("]"):rep(n) end

-- The verdict of `check` for a 503 with the body and its X-Depth header.
local function verdict(body, depth)
  local probe = ("503 [X-Depth: %d] body=%s"):format(depth, body)
  local r = proc.run({ "check", file, "--probe", probe }, { timeout = 60 })
  assert.are.equal(0, r.code, r.stdout:sub(1, 2000) .. r.stderr:sub(1, 2000))
  for _, line in ipairs(proc.lines(r.stdout)) do
    -- the row: the probe (cut when long), verdict, wait, rule
    if line:find("^  503 %[X%-Depth: %d+%] body=") then return line:match("%s(%S+)%s+%S+%s+%S+$") end
  end
  error("no row in:\n" .. r.stdout:sub(-2000))
end

describe("json.decode's nesting bound", function()
  it("decodes 256 levels", function()
    assert.are.equal("retry", verdict(nested(256), 256))
    assert.are.equal("retry", verdict(('{"k":'):rep(256) .. "1" .. ("}"):rep(256), 256))
  end)

  it("refuses 257 levels and 20,000 with nil, position, message", function()
    assert.are.equal("final", verdict(nested(257), 257))
    assert.are.equal("final", verdict(nested(20000), 20000))
    assert.are.equal("final", verdict(('{"k":'):rep(300) .. "1" .. ("}"):rep(300), 300))
  end)

  it("does not count brackets in strings or comments", function()
    local deep = ("["):rep(1000)
    assert.are.equal("retry", verdict('["' .. deep .. '"]', 1))
    assert.are.equal("retry", verdict('["a\\"' .. deep .. '"]', 1))
    assert.are.equal("retry", verdict("[/*" .. deep .. "*/1]", 1))
  end)

  it("counts brackets after a comment that holds a quote", function()
    assert.are.equal("final", verdict('/*"*/' .. nested(300), 300))
  end)
end)
