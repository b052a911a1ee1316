-- busted --helper: keeps the name of the test now running in the file
-- $LUARETRY_SPEC_NOW and each spec file's seconds in $LUARETRY_SPEC_TIMES.
-- A run that hangs is stopped by the Makefile's time limit, which then
-- names the test that never ended; dots alone do not say which it was.
local busted = require "busted"

local now_file, times_file = os.getenv("LUARETRY_SPEC_NOW"), os.getenv("LUARETRY_SPEC_TIMES")

local function write(path, mode, s)
  local f = path and io.open(path, mode)
  if f then f:write(s) f:close() end
end

local function where(element)
  local trace = element.trace or {}
  return (trace.short_src or "?") .. ":" .. (trace.currentline or "?")
end

busted.subscribe({ "test", "start" }, function (element, parent)
  write(now_file, "w", os.date("!%H:%M:%S ") .. where(element) .. ": " .. tostring(element.name) .. "\n")
  return nil, true
end)

local file_started = {}
busted.subscribe({ "file", "start" }, function (element)
  file_started[element.name] = busted.monotime()
  return nil, true
end)
busted.subscribe({ "file", "end" }, function (element)
  local t0 = file_started[element.name]
  if t0 then write(times_file, "a", string.format("%8.1f s  %s\n", busted.monotime() - t0, element.name)) end
  return nil, true
end)
