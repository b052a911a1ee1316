-- Logs no server can forge: control characters and bytes that are not
-- UTF-8 from the network are escaped in every log line and in --log-json
-- (which stays valid JSON), and no credential appears in any message.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
local proc = require "support.proc"

local HTTP = proc.root .. "/policies/http.lua"
local QUOTE = here .. "/fixtures/run/quote_body.lua"

-- No byte a terminal obeys: C0 controls but the newline, DEL, C1 (as
-- UTF-8 or bare), and every line valid UTF-8.
local function harmless(text)
  for line in text:gmatch("([^\n]*)\n?") do
    if not utf8.len(line) then return false, "not UTF-8: " .. line end
    if line:find("[%z\1-\31\127]") then return false, "a control: " .. line end
    if line:find("\194[\128-\159]") then return false, "a C1 control: " .. line end
  end
  return true
end

describe("logs no server can forge", function ()
  local srv, tmp
  setup(function () srv = proc.server(here .. "/fixtures/run/server.lua") end)
  teardown(function () if srv then srv:stop() end end)
  before_each(function () tmp = proc.tmpdir() end)
  after_each(function () proc.rmtree(tmp) end)

  it("a body quoted in a policy error and in print(): escaped on every line", function ()
    local r = proc.run({ "run", QUOTE, srv.base .. "/forge", "-v" }, { timeout = 20 })
    assert.are.equal(3, r.code, r.stderr)
    assert.is_true(harmless(r.stderr))
    -- no line of the server's: each starts as ours does (or as -v's
    -- header and libcurl lines: "> ", "< ", "* "), and the fake attempt
    -- line is inside one of them, escaped
    for _, line in ipairs(proc.lines(r.stderr)) do
      assert.is_truthy(line:match("^luaretry: ") or line:match("^[<>*] "), line)
    end
    assert.is_nil(r.stderr:find("\nluaretry: attempt 9/9", 1, true))
    assert.truthy(r.stderr:find("x\\x0aluaretry: attempt 9/9: 200 -> success (default)\\x0a\\x1b[2J\\x1b]0;pwned\\x07 " ..
                                "\\xff\\xfe \\xc2\\x9b \\x0d", 1, true), r.stderr)
  end)

  it("--log-json stays valid JSON, in UTF-8, whatever the server sent", function ()
    local log = tmp .. "/log.json"
    local r = proc.run({ "run", QUOTE, srv.base .. "/forge", "--log-json", log }, { timeout = 20 })
    assert.are.equal(3, r.code, r.stderr)
    local text = proc.readfile(log)
    local lines = proc.lines(text)
    assert.are.equal(2, #lines)  -- the attempt, then the summary
    assert.is_true(harmless(text))
    assert.is_true(proc.json.decode(lines[2]).summary)
    local e = proc.json.decode(lines[1])
    assert.are.equal("policy_error", e.verdict)
    -- bytes that are not UTF-8 come back as the Latin-1 characters
    assert.truthy(e.message:find("\nluaretry: attempt 9/9: 200 -> success (default)\n\27[2J\27]0;pwned\7 ÿþ \194\155 \r",
                                 1, true), e.message)
  end)

  it("a bad URL in a batch is named without its credentials", function ()
    local r = proc.run({ "run", HTTP, "http://user:pw-s3cret@127.0.0.1:99999999/x",
                         srv.base .. "/new" }, { timeout = 20 })
    assert.are.equal(2, r.code, r.stderr)
    assert.matches("bad URL http://127%.0%.0%.1:99999999/x", r.stderr)
    assert.is_nil(r.stderr:find("s3cret", 1, true), r.stderr)
    r = proc.run({ "run", HTTP, "http://us3r:pw-s3cret@[::1/x", srv.base .. "/new" }, { timeout = 20 })
    assert.are.equal(2, r.code, r.stderr)
    assert.is_nil(r.stderr:find("s3cret", 1, true), r.stderr)
  end)

  -- one URL's said only "bad URL: Bad path": which word was taken for it?
  it("one bad URL is named too, escaped and without its credentials", function ()
    local r = proc.run({ "run", HTTP, "http://user:pw-s3cret@127.0.0.1/a b\27[31m" }, { timeout = 20 })
    assert.are.equal(2, r.code, r.stderr)
    assert.matches("^luaretry: run: bad URL http://127%.0%.0%.1/a b\\x1b%[31m: ", r.stderr)
    assert.is_nil(r.stderr:find("s3cret", 1, true), r.stderr)
  end)
end)
