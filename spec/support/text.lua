-- spec/support/text.lua: small helpers the specs share.
local assert = require "luassert"
local M = {}

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
M.FIXTURES = here .. "../fixtures/"

-- The line of a fixture that carries "MARK:<mark>".
function M.line_of(file, mark)
  local n = 0
  for line in io.lines(M.FIXTURES .. file) do
    n = n + 1
    if line:find("MARK:" .. mark, 1, true) then return n end
  end
  error("no MARK:" .. mark .. " in " .. file)
end

-- Asserts that `haystack` holds `needle` as plain text.
function M.has(haystack, needle)
  assert.is_string(haystack)
  assert.is_truthy(haystack:find(needle, 1, true),
    ("expected to find %q in:\n%s"):format(needle, haystack))
end

-- How many times the pattern matches in s (nil: 0).
function M.count(s, pattern)
  return select(2, (s or ""):gsub(pattern, ""))
end

return M
