-- The shipped examples under policies/examples/ do what their headers say.
-- (iam-set-policy.lua runs in spec/workflow_spec.lua.)
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
local proc = require "support.proc"
local testing = require "testing"

local KEYED = proc.root .. "/policies/examples/idempotency-key.lua"
local POST = { method = "POST", url = "http://orders.example/v1", body = "{}" }
local NO_JITTER = { ["backoff.jitter"] = "none" }

describe("policies/examples/idempotency-key.lua", function()
  it("sends one key on every attempt of a call, a new key for the next call", function()
    local r = testing.run(KEYED, { 503, "reset", 200 }, { request = POST, set = NO_JITTER })
    assert.are.equal("success", r.verdict)
    assert.are.equal(3, r.attempts)
    local key = r.requests[1].headers["Idempotency-Key"]
    assert.matches("^%x+$", key)
    assert.are.equal(32, #key)
    assert.are.equal(key, r.requests[2].headers["Idempotency-Key"])
    assert.are.equal(key, r.requests[3].headers["Idempotency-Key"])
    local other = testing.run(KEYED, { 200 }, { request = POST, seed = 2 })
    assert.are_not.equal(key, other.requests[1].headers["Idempotency-Key"])
  end)

  it("keeps the caller's own key, whatever its case", function()
    local mine = { method = "POST", url = POST.url, headers = { ["idempotency-key"] = "k-7" } }
    local r = testing.run(KEYED, { 503, 200 }, { request = mine, set = NO_JITTER })
    assert.are.equal(2, r.attempts)
    assert.are.equal("k-7", r.requests[2].headers["idempotency-key"])
    assert.is_nil(r.requests[2].headers["Idempotency-Key"])
  end)

  it("replaces an empty key with its own: an empty key is no key", function()
    local blank = { method = "POST", url = POST.url, headers = { ["Idempotency-Key"] = "" } }
    local r = testing.run(KEYED, { 503, 200 }, { request = blank, set = NO_JITTER })
    assert.are.equal("success", r.verdict)
    assert.matches("^%x+$", r.requests[1].headers["Idempotency-Key"])
    assert.are.equal(32, #r.requests[1].headers["Idempotency-Key"])
    local bare = testing.run(proc.root .. "/policies/http.lua", { 503, 200 }, { request = blank })
    assert.are.same({ "final", "idempotency" }, { bare.verdict, bare.rule })
  end)

  it("is what lets the POST be retried: without prepare's key a 503 is final", function()
    local bare = testing.run(proc.root .. "/policies/http.lua", { 503, 200 }, { request = POST })
    assert.are.equal("final", bare.verdict)
    assert.are.equal("idempotency", bare.rule)
  end)

  it("leaves other methods alone and keeps the method rule for them", function()
    local r = testing.run(KEYED, { 503, 200 }, { request = { method = "PATCH", url = POST.url },
                                                  set = NO_JITTER })
    assert.are.equal("final", r.verdict)
    assert.is_nil(r.requests[1].headers["Idempotency-Key"])
    local g = testing.run(KEYED, { 503, 200 }, { set = NO_JITTER })
    assert.are.equal("success", g.verdict)
    assert.is_nil(g.requests[1].headers["Idempotency-Key"])
  end)

  it("under `luaretry run`, the server sees the same key on each attempt", function()
    local srv = proc.server(here .. "/fixtures/run/server.lua")
    finally(function() srv:stop() end)
    local r = proc.run({ "run", KEYED, srv.base .. "/flaky", "-X", "POST", "-d", "{}",
                         "--set", "backoff.initial=0.01", "--set", "backoff.jitter=none" },
                       { timeout = 30 })
    assert.are.equal(0, r.code, r.stderr)
    local seen = srv:requests_on("/flaky")
    assert.are.equal(3, #seen)
    local key = seen[1].headers["idempotency-key"]
    assert.matches("^%x+$", key)
    for i = 2, 3 do assert.are.equal(key, seen[i].headers["idempotency-key"]) end
  end)
end)
