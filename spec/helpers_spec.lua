-- lua/retry.lua, the helper library for policy scripts, required directly.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.loaded.retry = nil
local retry = require "retry"

describe("retry.status_in", function()
  it("is true exactly for the listed statuses", function()
    local t = retry.status_in{ 500, 502, 503, 504 }
    for _, s in ipairs{ 500, 502, 503, 504 } do assert.is_true(t(s)) end
    for _, s in ipairs{ 0, 200, 404, 501, 505 } do assert.is_false(t(s)) end
    assert.is_false(t(nil))
    assert.is_false(t("503"))
  end)

  it("is false for everything when the list is empty", function()
    assert.is_false(retry.status_in{}(503))
  end)

  it("refuses anything but integers", function()
    assert.has_error(function() retry.status_in{ 500, "503" } end)
    assert.has_error(function() retry.status_in{ 500.5 } end)
    local ok, err = pcall(retry.status_in, { 429, 503.5 })
    assert.is_false(ok)
    assert.is_truthy(err:find("expected integers", 1, true))
  end)

  it("matches a float status with an integral value", function()
    assert.is_true(retry.status_in{ 503 }(503.0))
    assert.is_false(retry.status_in{ 503 }(503.5))
  end)
end)

describe("retry.status_range", function()
  it("includes both ends", function()
    local r = retry.status_range(500, 599)
    assert.is_true(r(500))
    assert.is_true(r(599))
    assert.is_true(r(550))
    assert.is_false(r(499))
    assert.is_false(r(600))
  end)
end)

describe("retry.contains", function()
  it("finds plain text, not patterns", function()
    assert.is_true(retry.contains('{"status":"ABORTED"}', "ABORTED"))
    assert.is_false(retry.contains("axb", "a.b"))
    assert.is_true(retry.contains("a.b", "a.b"))
    assert.is_true(retry.contains("50% off", "%"))
    assert.is_false(retry.contains("aborted", "ABORTED"))
  end)

  it("is false for a body that is not a string", function()
    assert.is_false(retry.contains(nil, "x"))
    assert.is_false(retry.contains({}, "x"))
    assert.is_false(retry.contains(42, "4"))
  end)
end)

describe("retry.matches", function()
  it("returns the captures of a Lua pattern", function()
    assert.are.equal("ABORTED", retry.matches('{"status": "ABORTED"}', '"status":%s*"(%u+)"'))
    local a, b = retry.matches("retry in 12 s, code 7", "(%d+) s, code (%d+)")
    assert.are.equal("12", a)
    assert.are.equal("7", b)
    assert.are.equal("abc", retry.matches("xxabcxx", "abc"))
    assert.is_nil(retry.matches("nothing here", "%d+"))
  end)

  it("looks at the first 4 KiB only", function()
    local body = string.rep(" ", 4090) .. "ABORTED"
    assert.is_nil(retry.matches(body, "ABORTED"))
    assert.are.equal("ABO", retry.matches(body, "ABO"))
    assert.are.equal("ABORTED", retry.matches(string.rep(" ", 4089) .. "ABORTED", "%u+"))
  end)

  it("is nil for a body that is not a string", function()
    assert.is_nil(retry.matches(nil, "x"))
    assert.is_nil(retry.matches(7, "7"))
  end)
end)

describe("retry.any and retry.all", function()
  local is503 = retry.status_in{ 503 }
  local aborted = function(_, body) return retry.contains(body, "ABORTED") end
  local in_workflow = function(_, _, info) return info and info.workflow == true end

  it("any is true when one predicate is, passing every argument", function()
    local f = retry.any(is503, aborted, in_workflow)
    assert.is_true(f(503, ""))
    assert.is_true(f(409, "ABORTED"))
    assert.is_true(f(409, "", { workflow = true }))
    assert.is_false(f(409, "", { workflow = false }))
  end)

  it("all is true only when every predicate is", function()
    local f = retry.all(function(s) return s == 409 end, aborted, in_workflow)
    assert.is_true(f(409, "ABORTED", { workflow = true }))
    assert.is_false(f(409, "ABORTED", { workflow = false }))
    assert.is_false(f(409, "OK", { workflow = true }))
    assert.is_false(f(503, "ABORTED", { workflow = true }))
  end)

  it("any() of nothing is false, all() of nothing is true", function()
    assert.is_false(retry.any()(503))
    assert.is_true(retry.all()(503))
  end)

  it("stops at the first decisive predicate", function()
    local calls = 0
    local count = function() calls = calls + 1; return true end
    assert.is_true(retry.any(count, count)(1))
    assert.are.equal(1, calls)
    calls = 0
    local no = function() calls = calls + 1; return false end
    assert.is_false(retry.all(no, no)(1))
    assert.are.equal(1, calls)
  end)

  it("always returns a boolean", function()
    assert.are.equal(true, retry.any(function() return "yes" end)(1))
    assert.are.equal(false, retry.any(function() return nil end)(1))
  end)
end)
