-- check_abi.lua BASELINE.abi CURRENT.abi: `make check-abi`'s judge.
--
-- Runs libabigail's abidiff on two abidw dumps of one library (public
-- headers only) and prints its report.  Within a major version the ABI
-- may only grow (luaretry.h, "ABI"): new functions, new enum values, a
-- field carved from a struct's reserved room.  abidiff calls all of those
-- "changes" (its exit status says 4 for any change, 8 only for removed
-- symbols), so the report of leaf changes is read here, and any of these
-- fails the check:
--   - a function or variable removed (abidiff's own "incompatible");
--   - a struct whose size changed;
--   - a member that moved, changed type or went away, unless it is the
--     reserved room (reserved, reserved_32, ...) giving way to new fields;
--   - an enumerator that changed value or went away;
--   - a function whose return or parameter type changed.
-- Exit status 0 when compatible, 1 when not (each reason named), 2 when
-- abidiff itself failed.
local base, current = arg[1], arg[2]
if not base or not current then
  io.stderr:write("usage: lua5.4 check_abi.lua BASELINE.abi CURRENT.abi\n")
  os.exit(2)
end

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local p = assert(io.popen("abidiff --leaf-changes-only --no-show-locs " .. q(base) .. " " .. q(current) ..
                          " 2>&1; echo \"abidiff-status $?\""))
local report = p:read("a")
p:close()
local status = tonumber(report:match("abidiff%-status (%d+)%s*$"))
report = report:gsub("abidiff%-status %d+%s*$", "")
io.write(report)
if not status or status % 4 ~= 0 then -- bit 1: error, bit 2: usage
  io.stderr:write("check-abi: abidiff failed on " .. base .. " and " .. current .. "\n")
  os.exit(2)
end

local function reserved(name) return name and name:match("reserved[%w_]*$") ~= nil end

local why = {}
local function fail(fmt, ...) why[#why + 1] = string.format(fmt, ...) end

if status & 8 ~= 0 then fail("abidiff calls it incompatible (a symbol removed)") end
local struct, deleting
for line in report:gmatch("[^\n]+") do
  local removed = line:match("(%d+) Removed,")
  if removed and tonumber(removed) > 0 then fail("%s", line:gsub("^%s+", "")) end
  struct = line:match("^'(struct [%w_]+)") or line:match("^'(union [%w_]+)") or
           line:match("^'(enum [%w_]+)") or line:match("^'(typedef [%w_]+)") or struct
  if line:match("^%S") then deleting = nil end
  if line:match("^%s+type size changed from") then
    fail("%s: %s", struct or "a type", line:gsub("^%s+", ""))
  end
  if line:match("data members? deletions?") or line:match("data members? removals?") then
    deleting = true
  elseif line:match("data members? insertions?") or line:match("there are data member changes") then
    deleting = nil
  end
  local member = line:match("^%s+'[^']-([%w_]+)'.-offset changed") -- 'uint32_t x' offset changed
  if member and not reserved(member) then fail("%s: member %s moved", struct or "?", member) end
  local owner, typed = line:match("^%s+type '.-' of '([%w_]+)::([%w_]+)' changed")
  if typed and not reserved(typed) then fail("%s: member %s changed type", owner, typed) end
  local gone = deleting and line:match("^%s+'[^']-([%w_]+)'")
  if gone and not reserved(gone) then fail("%s: member %s removed", struct or "?", gone) end
  local enumerator = line:match("'([%w_]+)' from value") or line:match("enumerator '([%w_]+)' value changed")
  if enumerator then fail("%s: enumerator %s changed value", struct or "an enum", enumerator) end
  if line:match("enumerators? deletions?") then fail("%s: an enumerator removed", struct or "an enum") end
  if line:match("return type changed") or line:match("parameter %d+ of type '.-' changed:") or
     line:match("parameter %d+ of type '.-' was") then
    fail("a function's signature changed: %s", line:gsub("^%s+", ""))
  end
end

local name = current:match("([^/]+)%.abi$") or current
if #why > 0 then
  io.stderr:write("check-abi: " .. name .. ": an incompatible change against " .. base .. ":\n")
  for _, w in ipairs(why) do io.stderr:write("  " .. w .. "\n") end
  io.stderr:write("check-abi: a change on purpose makes a new major version; `make abi-baseline` " ..
                  "records an addition\n")
  os.exit(1)
end
print("check-abi: " .. name .. ": compatible with " .. base ..
      (status == 0 and " (no change)" or " (additions only)"))
