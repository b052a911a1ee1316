-- bytes.lua: the data the conformance runs upload and download, and how
-- both sides check it.  Shared by the testbench (a fault server script,
-- which may require from its own folder) and spec/conformance_spec.lua.
local M = {}

-- n bytes of a fixed pattern whose period (65537) divides no power of two,
-- so data resumed at a wrong offset never looks right.
local PERIOD
function M.pattern(n)
  if not PERIOD then
    local t, x = {}, 0x2545F491
    for i = 1, 65537 do
      x = (x * 1103515245 + 12345) & 0x7fffffff
      t[i] = string.char((x >> 16) & 0xff)
    end
    PERIOD = table.concat(t)
  end
  return PERIOD:rep(n // 65537 + 1):sub(1, n)
end

-- A 64-bit FNV-1a over 8-byte words (and the tail's bytes): fast enough for
-- megabytes in Lua, and any changed, missing or moved byte changes it.
function M.digest(s)
  local h, n = 0xcbf29ce484222325, #s
  local i = 1
  while i + 7 <= n do
    h = (h ~ string.unpack("<i8", s, i)) * 0x100000001b3
    i = i + 8
  end
  for k = i, n do h = (h ~ s:byte(k)) * 0x100000001b3 end
  return string.format("%016x", h)
end

return M
