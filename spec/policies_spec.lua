-- The shipped service policies, each against its published rules (the
-- pages each policy's header names): classification of the probe set, the
-- jitter-free schedule, the bounds of every jittered wait, the stop rule,
-- the time limits, a clean load.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local lr = require "luaretry"
local testing = require "testing"

local POLICIES = here .. "../policies/"
local FIX = here .. "fixtures/"
local function policy(name) return POLICIES .. name .. ".lua" end

local NO_JITTER = { ["backoff.jitter"] = "none", ["throttle_backoff.jitter"] = "none" }
local SEEDS = 500

-- The probe set: statuses, then status 0 with each transport failure.
local PROBE = { 200, 400, 401, 403, 404, 408, 409, 429, 500, 501, 502, 503, 504,
                "connect", "timeout", "reset", "dns", "tls", "tls_verify" }

local function merged(a, b)
  local t = {}
  for k, v in pairs(a) do t[k] = v end
  for k, v in pairs(b or {}) do t[k] = v end
  return t
end

-- Every probe classified as expected[probe] ("success", "retry", "final"),
-- by the policy's own is_transient (in `rule_file`, by default the policy).
local function classifies(file, expected, opts, rule_file)
  local verdicts, decisions = testing.verdicts(file, PROBE, opts)
  for i, probe in ipairs(PROBE) do
    assert.are.equal(expected[probe], verdicts[i],
      ("%s: %s"):format(file:match("[^/]*$"), tostring(probe)))
    if verdicts[i] == "retry" then
      assert.are.equal(rule_file or file:match("[^/]*$"), decisions[i].rule:match("([^/]*):%d+$"),
        "decided by the policy's own is_transient")
    end
  end
end

local function no_warnings(file)
  local p = assert(lr.load(file))
  assert.are.same({}, p:warnings())
end

-- Over many seeds, retry i waits within [lo[i], hi[i]]; where lo < hi the
-- waits really spread over most of the range.
local function bounded(file, lo, hi, opts)
  opts = opts or {}
  local ranges = testing.wait_range(testing.load(file, opts), { 503 }, { seeds = SEEDS })
  assert.are.equal(#lo, #ranges, "number of retries")
  for i, r in ipairs(ranges) do
    assert.are.equal(SEEDS, r.count)
    assert.is_true(r.min >= lo[i], ("retry %d: %.6f below %g"):format(i, r.min, lo[i]))
    assert.is_true(r.max <= hi[i], ("retry %d: %.6f above %g"):format(i, r.max, hi[i]))
    if hi[i] > lo[i] then
      assert.is_true(r.max - r.min > 0.9 * (hi[i] - lo[i]),
        ("retry %d: spread %.3f of %g"):format(i, r.max - r.min, hi[i] - lo[i]))
    else
      assert.are.equal(lo[i], r.min)
      assert.are.equal(lo[i], r.max)
    end
  end
end

-- ------------------------------------------------------------- every one

local SHIPPED = { "http", "gcs", "iam", "memorystore", "azure", "azure-interactive", "azure-batch",
                  "command" }

describe("every shipped policy", function()
  it("sets a deadline and bounds an attempt: a timeout shorter than the deadline, or a stall", function()
    for _, name in ipairs(SHIPPED) do
      local t = lr.load(policy(name)):tuning()
      assert.is_number(t.deadline, name)
      if name == "http" then  -- downloads: bounded by stalling, not by length
        assert.is_nil(t.attempt_timeout, name)
        assert.is_true(t.stall_timeout < t.deadline, name)
        assert.is_true(t.connect_timeout < t.deadline, name)
      else
        assert.is_number(t.attempt_timeout, name)
        assert.is_true(t.attempt_timeout < t.deadline, name)
      end
    end
  end)

  it("treats a certificate or host name that does not verify as final", function()
    for _, name in ipairs(SHIPPED) do
      assert.are.equal("final", testing.classify(policy(name), "tls_verify").verdict, name)
      local r = testing.run(policy(name), { "tls_verify", 200 })
      assert.are.equal(1, r.attempts, name)
      assert.are.equal("final", r.verdict, name)
    end
  end)

  -- The policies are installed alone: a relative path to a document beside
  -- them means nothing to their readers, so each cites the public page by
  -- its title instead.
  it("names its sources by title, not by a path into this project's documents", function()
    for _, name in ipairs(SHIPPED) do
      local f = assert(io.open(policy(name), "r"))
      local text = f:read("a")
      f:close()
      -- a shipped policy cites its guidance by the public page's title
      -- (Google Cloud's "Retry strategy", Azure's "Retry pattern"), never a
      -- relative path: an installed policy has nothing beside it to point to
      assert.is_nil(text:find("../", 1, true), name)
    end
  end)
end)

-- ----------------------------------------------------------------- http

describe("policies/http.lua (the default)", function()
  local HTTP = policy("http")

  it("too_large (--max-filesize) is final; retry_all_errors (--retry-all-errors) retries the rest", function()
    local big = { status = 0, error = "too_large" }
    assert.are.equal("final", testing.classify(HTTP, big).verdict)
    assert.are.equal("final", testing.classify(HTTP, 404).verdict)
    local set = { retry_all_errors = "true" }
    assert.are.equal("retry", testing.classify(HTTP, 404, { set = set }).verdict)
    assert.are.equal("retry", testing.classify(HTTP, "tls_verify", { set = set }).verdict)
    assert.are.equal("final", testing.classify(HTTP, big, { set = set }).verdict)
    assert.are.equal("success", testing.classify(HTTP, 200, { set = set }).verdict)
    -- (a POST without a key is still never repeated: is_idempotent, not the
    -- classifier, says so; spec/curl_compat_spec.lua runs it)
  end)

  it("loads without warnings", function() no_warnings(HTTP) end)

  it("retries 408, 429, 500, 502, 503, 504 and transport failures but tls_verify", function()
    classifies(HTTP, {
      [200] = "success", [400] = "final", [401] = "final", [403] = "final", [404] = "final",
      [408] = "retry", [409] = "final", [429] = "retry", [500] = "retry", [501] = "final",
      [502] = "retry", [503] = "retry", [504] = "retry",
      connect = "retry", timeout = "retry", reset = "retry", dns = "retry", tls = "retry",
      tls_verify = "final" })
  end)

  it("bounds an attempt by stalling (30 s below 1 byte/s, 30 s to connect), the call by 300 s", function()
    local t = lr.load(HTTP):tuning()
    assert.is_nil(t.attempt_timeout)
    assert.are.equal(30, t.stall_timeout)
    assert.are.equal(1, t.stall_speed)
    assert.are.equal(30, t.connect_timeout)
    assert.are.equal(300, t.deadline)
    -- a transfer that keeps moving is cut by the deadline alone
    local r = testing.run(HTTP, { 200 }, { duration = 1000 })
    assert.are.equal(300, r.decisions[1].elapsed)
    assert.is_true(r.elapsed <= 300)
  end)
end)

-- -------------------------------------------------------------- command

describe("policies/command.lua (run -- COMMAND without POLICY)", function()
  local CMD = policy("command")
  local function exit(n) return { kind = "command", status = n } end

  it("loads without warnings", function() no_warnings(CMD) end)

  it("retries every non-zero exit but 126, 127, 130 and 143; a timeout too; 0 succeeds", function()
    local want = { [0] = "success", [1] = "retry", [2] = "retry", [3] = "retry", [75] = "retry",
                   [124] = "retry", [125] = "retry", [126] = "final", [127] = "final",
                   [128] = "retry", [137] = "retry", [130] = "final", [143] = "final",
                   [255] = "retry" }
    for code, verdict in pairs(want) do
      assert.are.equal(verdict, testing.classify(CMD, exit(code)).verdict, "exit " .. code)
    end
    local timed_out = { kind = "command", status = 0, error = "timeout" }
    assert.are.equal("retry", testing.classify(CMD, timed_out).verdict)
  end)

  it("options.final_exit_codes and options.retry_exit_codes tune it", function()
    local set = { ["options.final_exit_codes"] = "1, 2 126,127" }
    assert.are.equal("final", testing.classify(CMD, exit(1), { set = set }).verdict)
    assert.are.equal("final", testing.classify(CMD, exit(2), { set = set }).verdict)
    assert.are.equal("retry", testing.classify(CMD, exit(3), { set = set }).verdict)
    assert.are.equal("retry", testing.classify(CMD, exit(130), { set = set }).verdict)
    set = { ["options.retry_exit_codes"] = "75" }
    assert.are.equal("retry", testing.classify(CMD, exit(75), { set = set }).verdict)
    assert.are.equal("final", testing.classify(CMD, exit(1), { set = set }).verdict)
    assert.are.equal("final", testing.classify(CMD, exit(127), { set = set }).verdict)
    set = { ["options.final_exit_codes"] = "1,x" }
    assert.are.equal("policy_error", testing.classify(CMD, exit(1), { set = set }).verdict)
  end)

  it("options.final_if_output, retry_if_output (Lua patterns over the error output); retry_all_errors", function()
    local function said(n, text) return { kind = "command", status = n, body = text } end
    local set = { ["options.final_if_output"] = "^fatal: %w+ denied" }
    assert.are.equal("final", testing.classify(CMD, said(1, "fatal: access denied\n"), { set = set }).verdict)
    assert.are.equal("retry", testing.classify(CMD, said(1, "warning: busy\n"), { set = set }).verdict)
    set = { ["options.retry_if_output"] = "Could not get lock", ["options.final_exit_codes"] = "1" }
    assert.are.equal("retry", testing.classify(CMD, said(1, "E: Could not get lock /x"), { set = set }).verdict)
    assert.are.equal("final", testing.classify(CMD, said(1, "E: other"), { set = set }).verdict)
    -- final first: both match, final wins
    set = { ["options.retry_if_output"] = "lock", ["options.final_if_output"] = "denied" }
    assert.are.equal("final", testing.classify(CMD, said(1, "lock denied"), { set = set }).verdict)
    set = { retry_all_errors = "true" }
    assert.are.equal("retry", testing.classify(CMD, exit(127), { set = set }).verdict)
    assert.are.equal("success", testing.classify(CMD, exit(0), { set = set }).verdict)
  end)

  it("is bounded: 5 attempts, 300 s each, 600 s in all; waits 1 s doubling to 30 s, + up to 1 s", function()
    local t = lr.load(CMD):tuning()
    assert.are.equal(5, t.max_attempts)
    assert.are.equal(300, t.attempt_timeout)
    assert.are.equal(600, t.deadline)
    local r = testing.run(CMD, { exit(1) })
    assert.are.equal(5, r.attempts)
    assert.are.equal("exhausted", r.verdict)
    local waits = testing.waits(CMD, { set = NO_JITTER, outcome = exit(1) })
    assert.are.same({ 1, 2, 4, 8 }, waits)
    bounded(CMD, { 1, 2, 4, 8 }, { 2, 3, 5, 9 })
  end)
end)

-- ------------------------------------------------------------------ gcs

describe("policies/gcs.lua (Cloud Storage: Retry strategy, truncated exponential backoff)", function()
  local GCS = policy("gcs")

  it("loads without warnings", function() no_warnings(GCS) end)

  -- "Retry strategy" adds 408 to the seed page's "5xx and 429"
  it("retries 408, 429, 5xx and every transport failure but tls_verify; the rest is final", function()
    classifies(GCS, {
      [200] = "success", [400] = "final", [401] = "final", [403] = "final", [404] = "final",
      [408] = "retry", [409] = "final", [429] = "retry", [500] = "retry", [501] = "retry",
      [502] = "retry", [503] = "retry", [504] = "retry",
      connect = "retry", timeout = "retry", reset = "retry", dns = "retry", tls = "retry",
      tls_verify = "final" })
    assert.are.same({ "retry", "final" }, testing.verdicts(GCS, { "truncated", 412 }))
    assert.are.same({ "retry", "retry", "final" }, testing.verdicts(GCS, { 507, 599, 600 }))
  end)

  it("without jitter waits 1, 2, 4, 8, 16 s, then 32 s four times", function()
    local w, r = testing.waits(GCS, { set = NO_JITTER })
    assert.are.same({ 1, 2, 4, 8, 16, 32, 32, 32, 32 }, w)
    assert.are.equal(10, r.attempts)
    assert.are.equal(159, r.elapsed)
  end)

  it("with --set backoff.max=64 waits up to 64 s", function()
    local w = testing.waits(GCS, { set = merged(NO_JITTER, { ["backoff.max"] = 64 }) })
    assert.are.same({ 1, 2, 4, 8, 16, 32, 64, 64, 64 }, w)
  end)

  it("waits min(2^n + r, 32), r in [0, 1]: spread below the cap, exactly 32 at it", function()
    bounded(GCS, { 1, 2, 4, 8, 16, 32, 32, 32, 32 }, { 2, 3, 5, 9, 17, 32, 32, 32, 32 })
    bounded(GCS, { 1, 2, 4, 8, 16, 32, 64, 64, 64 }, { 2, 3, 5, 9, 17, 33, 64, 64, 64 },
            { set = { ["backoff.max"] = 64 } })
  end)

  it("backoff.cap_jitter=false keeps clients spread at the cap", function()
    bounded(GCS, { 1, 2, 4, 8, 16, 32, 32, 32, 32 }, { 2, 3, 5, 9, 17, 33, 33, 33, 33 },
            { set = { ["backoff.cap_jitter"] = false } })
  end)

  it("stops after 10 attempts, at most 164 s of waiting", function()
    local r = testing.run(GCS, { 503 })
    assert.are.equal(10, r.attempts)
    assert.are.equal("exhausted", r.verdict)
    assert.are.equal("max_attempts", r.rule)
    for seed = 1, SEEDS do
      local e = testing.run(GCS, { "timeout" }, { seed = seed }).elapsed
      assert.is_true(e >= 159 and e <= 164, "elapsed " .. e)
    end
    assert.are.equal(3, testing.run(GCS, { 503, 429, 200 }).attempts)
    assert.are.equal("success", testing.run(GCS, { 503, 429, 200 }).verdict)
  end)

  describe("is_idempotent", function()
    local function idem(method, url, headers)
      return testing.is_idempotent(GCS, { method = method, url = url, headers = headers })
    end
    local OBJ = "https://storage.googleapis.com/upload/storage/v1/b/bkt/o?uploadType=media&name=a.txt"

    -- DELETE is no longer repeated unconditionally: "Retry strategy" makes an
    -- object delete conditional on a generation precondition.
    it("repeats GET, HEAD and OPTIONS; DELETE only where the retry strategy allows", function()
      for _, m in ipairs { "GET", "HEAD", "OPTIONS", "get" } do
        assert.is_true(idem(m, OBJ), m)
      end
      assert.is_true(testing.is_idempotent(GCS, { url = OBJ }))  -- no method: a GET
      assert.is_false(idem("DELETE", OBJ))
      assert.is_true(idem("DELETE", OBJ .. "&ifGenerationMatch=3"))
    end)

    -- An object insert needs a generation precondition: ifMetagenerationMatch
    -- alone does not make the POST to the upload URL repeatable any more.
    it("repeats a POST, PATCH or PUT only with a precondition in the query", function()
      for _, m in ipairs { "POST", "PATCH", "PUT" } do
        assert.is_false(idem(m, OBJ), m)
        assert.is_true(idem(m, OBJ .. "&ifGenerationMatch=0"), m)
        if m ~= "POST" then assert.is_true(idem(m, OBJ .. "&ifMetagenerationMatch=3"), m) end
        assert.is_true(idem(m, "https://storage.googleapis.com/b/bkt/o/a.txt?generation=1712"), m)
        assert.is_true(idem(m, "https://storage.googleapis.com/b/bkt/o/a.txt?ifGenerationMatch=5#x"), m)
      end
      assert.is_false(idem("POST", OBJ .. "&ifMetagenerationMatch=3"))
    end)

    it("does not take a name in the path, a fragment, another parameter or an empty value", function()
      assert.is_false(idem("PUT", "https://storage.googleapis.com/bkt/ifGenerationMatch=1"))
      assert.is_false(idem("PUT", "https://storage.googleapis.com/bkt/generation"))
      assert.is_false(idem("PUT", "https://storage.googleapis.com/bkt/o#ifGenerationMatch=1"))
      assert.is_false(idem("PUT", OBJ .. "&ifGenerationNotMatch=4"))
      assert.is_false(idem("PUT", OBJ .. "&xgeneration=4"))
      assert.is_false(idem("PUT", OBJ .. "&ifGenerationMatch="))
      assert.is_false(idem("PUT", OBJ .. "&ifGenerationMatch"))
    end)

    -- The JSON API's insert takes ifGenerationMatch, not the XML API's
    -- header ("Request preconditions"): the header counts on XML paths.
    it("takes the header x-goog-if-generation-match in any case", function()
      local XML = "https://storage.googleapis.com/bkt/a.txt"
      for _, h in ipairs { "x-goog-if-generation-match", "X-Goog-If-Generation-Match",
                           "X-GOOG-IF-GENERATION-MATCH" } do
        assert.is_true(idem("PUT", OBJ, { [h] = "12" }), h)
        assert.is_true(idem("PUT", XML, { [h] = "12" }), h)
        assert.is_true(idem("POST", XML, { ["Content-Type"] = "text/plain", [h] = "0" }), h)
        assert.is_false(idem("POST", OBJ, { ["Content-Type"] = "text/plain", [h] = "0" }), h)
      end
      assert.is_false(idem("PUT", OBJ, { ["x-goog-if-generation-match"] = "" }))
      -- a blank precondition is none, as a blank Idempotency-Key is no key
      local XML_ = "https://storage.googleapis.com/bkt/a.txt"
      assert.is_false(idem("PUT", XML_, { ["x-goog-if-generation-match"] = "  " }))
      assert.is_false(idem("PUT", XML_, { ["x-goog-if-metageneration-match"] = " " }))
      assert.is_false(idem("PUT", OBJ, { ["Content-Type"] = "text/plain" }))
    end)

    it("does not repeat other methods", function()
      assert.is_false(idem("COPY", OBJ .. "&ifGenerationMatch=1"))
      assert.is_false(idem("TRACE", OBJ))
    end)
  end)

  -- The retry strategy's table, operation by operation, decided by the real
  -- engine (p:is_idempotent runs the script in the sandbox).
  describe("is_idempotent, operation by operation", function()
    local p
    setup(function() p = assert(lr.load(GCS)) end)
    local J = "https://storage.googleapis.com/storage/v1"
    local U = "https://storage.googleapis.com/upload/storage/v1"
    local function idem(method, url, headers, body)
      return p:is_idempotent { method = method, url = url, headers = headers, body = body }
    end

    it("always: gets and lists, bucket insert and delete, lockRetentionPolicy, key and notification deletes", function()
      assert.is_true(idem("GET", J .. "/b?project=p"))
      assert.is_true(idem("GET", J .. "/b/bkt/iam/testPermissions?permissions=storage.buckets.get"))
      assert.is_true(idem("POST", J .. "/b?project=p", nil, '{"name":"new"}'))
      assert.is_true(idem("DELETE", J .. "/b/bkt"))
      assert.is_true(idem("POST", J .. "/b/bkt/lockRetentionPolicy?ifMetagenerationMatch=2"))
      assert.is_true(idem("POST", J .. "/b/bkt/lockRetentionPolicy"))
      assert.is_true(idem("DELETE", J .. "/projects/p/hmacKeys/GOOG1"))
      assert.is_true(idem("DELETE", J .. "/b/bkt/notificationConfigs/7"))
      assert.is_true(idem("GET", "https://bkt.storage.googleapis.com/a/b.txt"))
      assert.is_true(idem("PUT", "https://storage.googleapis.com/newbucket"))  -- XML bucket create
      assert.is_true(idem("DELETE", "https://storage.googleapis.com/newbucket"))
    end)

    it("never: ACL changes, HMAC key create, notification create", function()
      for _, base in ipairs { J .. "/b/bkt/acl", J .. "/b/bkt/defaultObjectAcl", J .. "/b/bkt/o/obj/acl" } do
        assert.is_false(idem("POST", base), base)
        for _, m in ipairs { "PATCH", "PUT", "DELETE" } do
          assert.is_false(idem(m, base .. "/user-x@example.com"), m .. " " .. base)
          assert.is_false(idem(m, base .. "/user-x@example.com?ifMetagenerationMatch=1"), m .. " " .. base)
        end
        assert.is_true(idem("GET", base), base)
      end
      assert.is_false(idem("POST", J .. "/projects/p/hmacKeys?serviceAccountEmail=sa@p.iam"))
      assert.is_false(idem("POST", J .. "/b/bkt/notificationConfigs", nil, '{"topic":"t"}'))
      assert.is_false(idem("PUT", "https://storage.googleapis.com/bkt/obj?acl", { ["x-goog-if-generation-match"] = "1" }))
      assert.is_false(idem("POST", "https://storage.googleapis.com/batch/storage/v1"))
    end)

    it("bucket and object patch and update: ifMetagenerationMatch or If-Match", function()
      for _, url in ipairs { J .. "/b/bkt", J .. "/b/bkt/o/obj" } do
        for _, m in ipairs { "PATCH", "PUT" } do
          assert.is_false(idem(m, url), m .. " " .. url)
          assert.is_true(idem(m, url .. "?ifMetagenerationMatch=4"), m .. " " .. url)
          assert.is_true(idem(m, url, { ["If-Match"] = '"CAE="' }), m .. " " .. url)
          assert.is_false(idem(m, url .. "?ifGenerationMatch=4"), m .. " " .. url)
        end
      end
      -- a POST that says it is a PATCH is judged as one
      assert.is_false(idem("POST", J .. "/b/bkt", { ["X-HTTP-Method-Override"] = "PATCH" }))
      assert.is_true(idem("POST", J .. "/b/bkt?ifMetagenerationMatch=1", { ["X-HTTP-Method-Override"] = "PATCH" }))
    end)

    it("setIamPolicy and HMAC key update: an etag in the JSON body, or If-Match", function()
      for _, url in ipairs { J .. "/b/bkt/iam", J .. "/projects/p/hmacKeys/GOOG1" } do
        assert.is_false(idem("PUT", url, nil, '{"bindings":[],"version":3}'), url)
        assert.is_true(idem("PUT", url, nil, '{"bindings":[],"etag":"CAE="}'), url)
        assert.is_true(idem("PUT", url, nil, '{\n  "state": "INACTIVE",\n  "etag" : "CAI="\n}'), url)
        assert.is_false(idem("PUT", url, nil, '{"bindings":[],"etag":""}'), url)
        assert.is_false(idem("PUT", url, nil, '{"bindings":[{"role":"r","members":[],"etag":"x"}]}'), url)
        assert.is_false(idem("PUT", url, nil, '{"etag": "CAE=", "bindings": ['), url)  -- cut short
        assert.is_false(idem("PUT", url), url)
        assert.is_true(idem("PUT", url, { ["if-match"] = "CAE=" }), url)
        assert.is_false(idem("PUT", url .. "?ifMetagenerationMatch=1"), url)
      end
    end)

    it("object insert, compose, copy, rewrite and delete: a generation precondition", function()
      local ops = {
        { "POST", U .. "/b/bkt/o?uploadType=media&name=obj" },
        { "POST", U .. "/b/bkt/o?uploadType=multipart" },
        { "POST", U .. "/b/bkt/o?uploadType=resumable&name=obj" },
        { "POST", J .. "/b/bkt/o/obj/compose" },
        { "POST", J .. "/b/bkt/o/src/copyTo/b/bkt/o/dst" },
        { "POST", J .. "/b/bkt/o/src/rewriteTo/b/other/o/dst" },
        { "DELETE", J .. "/b/bkt/o/obj" },
      }
      for _, op in ipairs(ops) do
        local m, url = op[1], op[2]
        local sep = url:find("?", 1, true) and "&" or "?"
        assert.is_false(idem(m, url), m .. " " .. url)
        assert.is_true(idem(m, url .. sep .. "ifGenerationMatch=0"), m .. " " .. url)
        assert.is_true(idem(m, url .. sep .. "generation=17"), m .. " " .. url)
        assert.is_false(idem(m, url .. sep .. "ifMetagenerationMatch=1"), m .. " " .. url)
        assert.is_false(idem(m, url, { ["x-goog-if-generation-match"] = "0" }), m .. " " .. url)
      end
      -- XML: the header, and for a delete the generation too
      local X = "https://storage.googleapis.com/bkt/dir/obj.txt"
      assert.is_false(idem("PUT", X))
      assert.is_true(idem("PUT", X, { ["x-goog-if-generation-match"] = "0" }))
      assert.is_true(idem("PUT", "https://bkt.storage.googleapis.com/obj", { ["x-goog-if-generation-match"] = "0" }))
      assert.is_false(idem("PUT", "https://bkt.storage.googleapis.com/obj"))
      assert.is_false(idem("DELETE", X))
      assert.is_true(idem("DELETE", X .. "?generation=1712"))
      assert.is_true(idem("POST", X, { ["x-goog-resumable"] = "start", ["x-goog-if-generation-match"] = "0" }))
      assert.is_false(idem("PUT", "https://storage.googleapis.com/bkt?lifecycle"))
      assert.is_true(idem("PUT", "https://storage.googleapis.com/bkt?lifecycle",
                          { ["x-goog-if-metageneration-match"] = "3" }))
    end)

    it("a resumable upload session's PUTs and cancel: always (upload_id)", function()
      local session = U .. "/b/bkt/o?uploadType=resumable&upload_id=ADPycdtz"
      assert.is_true(idem("PUT", session, { ["Content-Range"] = "bytes 0-99/100" }))
      assert.is_true(idem("PUT", session, { ["Content-Range"] = "bytes */100" }))
      assert.is_true(idem("POST", session))
      assert.is_true(idem("DELETE", session))
      assert.is_true(idem("PUT", "https://storage.googleapis.com/bkt/obj?upload_id=ADPy"))
      assert.is_true(idem("PUT", "https://storage.googleapis.com/bkt/obj?partNumber=2&uploadId=VXB"))
      assert.is_false(idem("PUT", U .. "/b/bkt/o?uploadType=resumable&upload_id="))
    end)

    it("reads a body for its etag only when it was handed the whole of it", function()
      local body = '{"bindings":[],"etag":"CAE="}'
      assert.is_true(testing.is_idempotent(GCS, { method = "PUT", url = J .. "/b/bkt/iam", body = body,
                                                  body_len = #body }))
      -- a body longer than body_limit (64 KiB): the script is handed a prefix
      assert.is_false(testing.is_idempotent(GCS, { method = "PUT", url = J .. "/b/bkt/iam", body = body,
                                                   body_len = 100000 }))
      -- an upload's body is never parsed: 1 MiB of "etag" text is not read
      local big = ('"etag":"x",'):rep(100000)
      assert.is_false(idem("POST", U .. "/b/bkt/o?uploadType=media&name=o", nil, big))
      assert.is_true(idem("POST", U .. "/b/bkt/o?uploadType=media&name=o&ifGenerationMatch=0", nil, big))
    end)

    it("judges an upload of any size: the script sees body_len and a prefix", function()
      -- 64 MiB: far past the script's 8 MiB memory limit, were it copied whole
      local url = U .. "/b/bkt/o?uploadType=media&name=o"
      assert.is_true(testing.is_idempotent(GCS, { method = "POST", url = url .. "&ifGenerationMatch=0",
                                                  body_len = 64 * 1024 * 1024 }))
      assert.is_false(testing.is_idempotent(GCS, { method = "POST", url = url,
                                                   body_len = 64 * 1024 * 1024 }))
    end)
  end)

  it("sets an attempt timeout and a deadline: 120 s and 600 s", function()
    local t = lr.load(GCS):tuning()
    assert.are.equal(120, t.attempt_timeout)
    assert.are.equal(600, t.deadline)
    local r = testing.run(GCS, { 503 }, { duration = 200 })  -- every attempt hangs
    assert.are.equal("deadline", r.verdict)
    assert.is_true(r.elapsed <= 600, "elapsed " .. r.elapsed)
  end)
end)

-- ------------------------------------------------------------------ iam

describe("policies/iam.lua (IAM: Retry failed requests)", function()
  local IAM = policy("iam")
  local ABORTED = '{"error":{"code":409,"message":"There were concurrent policy changes.","status":"ABORTED"}}'

  it("loads without warnings", function() no_warnings(IAM) end)

  it("retries 429, 500, 502, 503, 504 and transport failures but tls_verify; the rest is final", function()
    classifies(IAM, {
      [200] = "success", [400] = "final", [401] = "final", [403] = "final", [404] = "final",
      [408] = "final", [409] = "final", [429] = "retry", [500] = "retry", [501] = "final",
      [502] = "retry", [503] = "retry", [504] = "retry",
      connect = "retry", timeout = "retry", reset = "retry", dns = "retry", tls = "retry",
      tls_verify = "final" })
  end)

  -- needs the engine's policy options (options = {...}, --set options.NAME=VALUE)
  it("retries 404 only with --set options.retry_404=true", function()
    assert.are.equal("final", testing.classify(IAM, 404).verdict)
    local set = { ["options.retry_404"] = true }
    assert.are.equal("retry", testing.classify(IAM, 404, { set = set }).verdict)
    local r = testing.run(IAM, { 404, 404, 200 }, { set = set })
    assert.are.equal("success", r.verdict)
    assert.are.equal(3, r.attempts)
    -- the rest of the classification is unchanged
    classifies(IAM, {
      [200] = "success", [400] = "final", [401] = "final", [403] = "final", [404] = "retry",
      [408] = "final", [409] = "final", [429] = "retry", [500] = "retry", [501] = "final",
      [502] = "retry", [503] = "retry", [504] = "retry",
      connect = "retry", timeout = "retry", reset = "retry", dns = "retry", tls = "retry",
      tls_verify = "final" },
      { set = set })
    assert.are.equal("final", testing.classify(IAM, 404, { set = { ["options.retry_404"] = false } }).verdict)
    local p = assert(lr.load(IAM))
    assert.is_true(p:set("options.retry_404", "true"))
    assert.are.equal("retry", p:classify { status = 404 }.verdict)
    local bad, err = lr.load(IAM, { set = { ["options.retry_404"] = "maybe" } })
    assert.is_nil(bad)
    assert.is_truthy(err:find("options.retry_404", 1, true))
    local typo, err2 = lr.load(IAM, { set = { ["options.retry404"] = true } })
    assert.is_nil(typo)
    assert.is_truthy(err2:find("retry_404", 1, true))
  end)

  it("retries a 409 ABORTED only inside a workflow", function()
    local function verdict(body, workflow)
      return testing.classify(IAM, { status = 409, body = body, workflow = workflow }).verdict
    end
    assert.are.equal("retry", verdict('{"error":{"status":"ABORTED"}}', true))
    assert.are.equal("final", verdict('{"error":{"status":"ABORTED"}}', false))
    assert.are.equal("final", verdict('{"error":{"status":"ABORTED"}}', nil))
    assert.are.equal("retry", verdict(ABORTED, true))
    assert.are.equal("retry", verdict('{\n  "error": {\n    "status" : "ABORTED"\n  }\n}', true))
    -- other conflicts are final, in a workflow too
    assert.are.equal("final", verdict('{"error":{"status":"ALREADY_EXISTS"}}', true))
    assert.are.equal("final", verdict('{"error":{"message":"ABORTED by user","status":"FAILED_PRECONDITION"}}', true))
    assert.are.equal("final", verdict("", true))
    assert.are.equal("final", verdict(nil, true))
    -- a whole workflow: two lost races, then the write wins
    local conflict = { status = 409, body = ABORTED }
    local r = testing.run(IAM, { conflict, conflict, 200 }, { outcome = { workflow = true } })
    assert.are.equal("success", r.verdict)
    assert.are.equal(3, r.attempts)
    assert.are.equal("final", testing.run(IAM, { conflict, 200 }).verdict)
  end)

  it("without jitter waits 1, 2, 4, 8, 16 s, then 32 s until the 300 s deadline", function()
    local w, r = testing.waits(IAM, { set = NO_JITTER })
    assert.are.same({ 1, 2, 4, 8, 16, 32, 32, 32, 32, 32, 32, 32, 32 }, w)
    assert.are.equal(14, r.attempts)
    assert.are.equal(287, r.elapsed)
    assert.are.equal("deadline", r.verdict)
    local w64 = testing.waits(IAM, { set = merged(NO_JITTER, { ["backoff.max"] = 64 }) })
    assert.are.same({ 1, 2, 4, 8, 16, 32, 64, 64, 64 }, w64)
  end)

  it("waits min(2^n + r, 32), r in [0, 1]: spread below the cap, exactly 32 at it", function()
    local lo = { 1, 2, 4, 8, 16, 32, 32, 32, 32, 32, 32, 32, 32 }
    local hi = { 2, 3, 5, 9, 17, 32, 32, 32, 32, 32, 32, 32, 32 }
    bounded(IAM, lo, hi)
  end)

  it("stops at the 300 s deadline, never later, however long attempts last", function()
    local r = testing.run(IAM, { 503 })
    assert.are.equal("deadline", r.verdict)
    assert.are.equal("deadline", r.rule)
    assert.is_nil(lr.load(IAM):tuning().max_attempts)
    assert.are.equal(300, lr.load(IAM):tuning().deadline)
    for _, d in ipairs { 0, 0.5, 7, 29, 61, 150, 299, 400 } do
      for seed = 1, 20 do
        local q = testing.run(IAM, { "timeout" }, { seed = seed, duration = d })
        assert.are.equal("deadline", q.verdict)
        assert.is_true(q.elapsed <= 300, "elapsed " .. q.elapsed)
      end
    end
  end)

  it("gives one attempt 30 s: a silent server costs a retry, not the deadline", function()
    assert.are.equal(30, lr.load(IAM):tuning().attempt_timeout)
    local r = testing.run(IAM, { 503 }, { duration = 100, set = NO_JITTER })
    assert.are.equal("deadline", r.verdict)
    assert.is_true(r.attempts >= 7, "attempts " .. r.attempts)  -- 30 s each, plus the waits
  end)

  it("is what a workflow that requires it classifies with", function()
    local wf = FIX .. "t_iam_workflow.lua"
    no_warnings(wf)
    local t = lr.load(wf):tuning()
    assert.are.equal("t_iam_workflow", t.name)
    assert.are.equal(300, t.deadline)
    assert.are.equal(32, t.backoff.max)
    assert.is_true(t.backoff.cap_jitter)
    local conflict = { status = 409, body = ABORTED }
    assert.are.same({ "retry", "final", "retry", "final" },
      testing.verdicts(wf, { merged(conflict, { workflow = true }), conflict, 503, 404 }))
    assert.are.equal("retry", testing.classify(wf, 404, { set = { ["options.retry_404"] = true } }).verdict)
  end)
end)

-- ---------------------------------------------------------- memorystore

describe("policies/memorystore.lua (Memorystore for Redis: exponential backoff)", function()
  local MS = policy("memorystore")

  it("loads without warnings", function() no_warnings(MS) end)

  it("retries 5xx, 429 and transport failures but tls_verify; the rest is final", function()
    classifies(MS, {
      [200] = "success", [400] = "final", [401] = "final", [403] = "final", [404] = "final",
      [408] = "final", [409] = "final", [429] = "retry", [500] = "retry", [501] = "retry",
      [502] = "retry", [503] = "retry", [504] = "retry",
      connect = "retry", timeout = "retry", reset = "retry", dns = "retry", tls = "retry",
      tls_verify = "final" })
  end)

  it("without jitter waits 1 to 32 s, then 64 s five times", function()
    local w = testing.waits(MS, { set = NO_JITTER })
    assert.are.same({ 1, 2, 4, 8, 16, 32, 64, 64, 64, 64, 64 }, w)
  end)

  it("waits min(2^n + r, 64), r up to 1000 ms: spread below the cap, exactly 64 at it", function()
    bounded(MS, { 1, 2, 4, 8, 16, 32, 64, 64, 64, 64, 64 },
                { 2, 3, 5, 9, 17, 33, 64, 64, 64, 64, 64 })
  end)

  it("keeps retrying at the cap up to 12 attempts, never forever", function()
    local r = testing.run(MS, { 503 })
    assert.are.equal(12, r.attempts)
    assert.are.equal("exhausted", r.verdict)
    assert.are.equal("max_attempts", r.rule)
    assert.are.equal(12, lr.load(MS):tuning().max_attempts)
    for seed = 1, SEEDS do
      local e = testing.run(MS, { 500 }, { seed = seed }).elapsed
      assert.is_true(e >= 383 and e <= 389, "elapsed " .. e)
    end
  end)

  it("gives one attempt 30 s and the whole call 600 s, which holds the whole schedule", function()
    local t = lr.load(MS):tuning()
    assert.are.equal(30, t.attempt_timeout)
    assert.are.equal(600, t.deadline)
    local r = testing.run(MS, { "timeout" }, { duration = 30 })
    assert.are.equal("deadline", r.verdict)
    assert.is_true(r.elapsed <= 600)
  end)
end)

-- ---------------------------------------------------------------- azure

-- The Retry pattern's three answers, shared by the three Azure tunings.
local AZURE = {
  [200] = "success", [400] = "final", [401] = "final", [403] = "final", [404] = "final",
  [408] = "retry", [409] = "final", [429] = "retry", [500] = "retry", [501] = "final",
  [502] = "retry", [503] = "retry", [504] = "retry",
  connect = "retry", timeout = "retry", reset = "retry", dns = "retry", tls = "retry",
  tls_verify = "final" }

local function azure_answers(file, first)
  it("loads without warnings", function() no_warnings(file) end)

  it("cancels, retries at once or retries after a delay, by kind of fault", function()
    classifies(file, AZURE, nil, "azure_faults.lua")  -- one classifier for the three
    local _, d = testing.verdicts(file, PROBE, { set = NO_JITTER })
    for i, probe in ipairs(PROBE) do
      if probe == "reset" then
        assert.are.equal(0, d[i].wait, "a reset: at once")
        assert.are.equal("script", d[i].source)
      elseif d[i].verdict == "retry" then
        assert.are.equal(first, d[i].wait, tostring(probe) .. ": after the delay")
        -- throttling (429, a 503 ServerBusy) has its own backoff, tuned alike
        assert.are.equal(probe == 429 and "throttle" or "backoff", d[i].source)
      end
    end
  end)

  it("waits as long as retry-after-ms or x-ms-retry-after-ms says, as the Azure SDKs do", function()
    local function first_wait(headers, status)
      local d = testing.classify(file, { status = status or 503, headers = headers }, { set = NO_JITTER })
      return d.verdict, d.wait, d.source
    end
    local v, w, src = first_wait({ ["retry-after-ms"] = "1500" })
    assert.are.same({ "retry", 1.5, "script" }, { v, w, src })
    v, w = first_wait({ ["x-ms-retry-after-ms"] = "250" }, 429)
    assert.are.same({ "retry", 0.25 }, { v, w })
    v, w = first_wait({ ["Retry-After-Ms"] = " 100 " }, 500)  -- any case, blanks around
    assert.are.same({ "retry", 0.1 }, { v, w })
    -- retry-after-ms first, as the SDKs read them
    v, w = first_wait({ ["x-ms-retry-after-ms"] = "900", ["retry-after-ms"] = "300" })
    assert.are.same({ "retry", 0.3 }, { v, w })
    -- garbage, negative or empty: ignored, the backoff applies
    for _, bad in ipairs { "soon", "-5", "", "1e3", "0x10" } do
      v, w, src = first_wait({ ["retry-after-ms"] = bad })
      assert.are.same({ "retry", first, "backoff" }, { v, w, src }, bad)
    end
    -- a hint does not make a final answer transient
    assert.are.equal("final", (first_wait({ ["retry-after-ms"] = "100" }, 400)))
    -- a Retry-After above the hint still wins: never earlier than any server asked
    local r = testing.run(file, { { status = 503, retry_after = 1.25,
                                    headers = { ["retry-after-ms"] = "200", ["Retry-After"] = "1.25" } },
                                  200 }, { set = NO_JITTER })
    assert.are.same({ 1.25 }, r.waits)
  end)

  it("retries a reset at once only the first time in a call", function()
    local r = testing.run(file, { "reset", "reset", 200 }, { set = NO_JITTER })
    assert.are.equal(0, r.waits[1])
    assert.is_true(r.waits[2] > 0)
    assert.are.equal("success", r.verdict)
    local q = testing.run(file, { 503, "reset", 200 }, { set = NO_JITTER })
    assert.is_true(q.waits[2] > 0)
  end)
end

-- Equal jitter: retry i waits within [v/2, v] of the jitter-free wait v.
local function equal_jitter(file, nominal)
  it("spreads each wait by equal jitter, between half and all of it", function()
    local lo = {}
    for i, v in ipairs(nominal) do lo[i] = v / 2 end
    bounded(file, lo, nominal)
  end)
end

describe("policies/azure.lua (Azure Architecture Center: Retry pattern)", function()
  local AZ = policy("azure")
  azure_answers(AZ, 5)
  equal_jitter(AZ, { 5, 10, 20 })

  it("gives one attempt 30 s and the whole call 120 s", function()
    local t = lr.load(AZ):tuning()
    assert.are.equal(30, t.attempt_timeout)
    assert.are.equal(120, t.deadline)
    -- a hint past the deadline is not waited for
    local r = testing.run(AZ, { { status = 503, headers = { ["x-ms-retry-after-ms"] = "200000" } }, 200 })
    assert.are.equal("deadline", r.verdict)
    assert.are.equal(1, r.attempts)
  end)

  it("without jitter waits 5, 10, 20 s: 4 attempts in all", function()
    local w, r = testing.waits(AZ, { set = NO_JITTER })
    assert.are.same({ 5, 10, 20 }, w)
    assert.are.equal(4, r.attempts)
    assert.are.equal("exhausted", r.verdict)
  end)
end)

describe("policies/azure-interactive.lua (Retry pattern: interactive, fail fast)", function()
  local AI = policy("azure-interactive")
  azure_answers(AI, 0.5)
  equal_jitter(AI, { 0.5, 1 })

  it("without jitter waits 0.5 and 1 s: 3 attempts in all", function()
    local w, r = testing.waits(AI, { set = NO_JITTER })
    assert.are.same({ 0.5, 1 }, w)
    assert.are.equal(3, r.attempts)
    assert.are.equal("exhausted", r.verdict)
  end)

  it("gives up within 10 s however long attempts last", function()
    local r = testing.run(AI, { 503 }, { duration = 5, set = NO_JITTER })
    assert.are.equal("deadline", r.verdict)
    assert.are.equal(2, r.attempts)
    assert.are.equal(10, r.elapsed)
    for seed = 1, 50 do
      for _, d in ipairs { 0, 1, 3, 4.9, 9, 12 } do
        local q = testing.run(AI, { "timeout" }, { seed = seed, duration = d })
        assert.is_true(q.elapsed <= 10)
        assert.is_true(q.attempts <= 3)
      end
    end
  end)

  it("does not wait for a server that asks for more than 2 s", function()
    local r = testing.run(AI, { { status = 429, retry_after = 5 }, 200 })
    assert.are.equal(1, r.attempts)
    assert.are.equal("server_wait_too_long", r.verdict)
    assert.are.equal("max_retry_after", r.rule)
    local q = testing.run(AI, { { status = 503, retry_after = 1.5 }, 200 })
    assert.are.equal("success", q.verdict)
    assert.is_true(q.waits[1] >= 1.5)
    -- the same for the millisecond hints, which the script reads: final
    local m = testing.run(AI, { { status = 429, headers = { ["retry-after-ms"] = "5000" } }, 200 })
    assert.are.equal(1, m.attempts)
    assert.are.equal("final", m.verdict)
    local n = testing.run(AI, { { status = 503, headers = { ["x-ms-retry-after-ms"] = "1500" } }, 200 })
    assert.are.equal("success", n.verdict)
    assert.are.equal("script", n.decisions[1].source)
    -- the hint spread upward by the jitter (up to jitter_max, 1 s)
    assert.is_true(n.waits[1] >= 1.5 and n.waits[1] <= 2.5, tostring(n.waits[1]))
  end)

  it("gives one attempt 5 s", function()
    assert.are.equal(5, lr.load(AI):tuning().attempt_timeout)
    local r = testing.run(AI, { 200 }, { duration = 7 })  -- every answer comes too late
    assert.are.equal("retry", r.decisions[1].verdict)
    assert.are.equal(5, r.decisions[1].elapsed)
    assert.are.equal("deadline", r.verdict)
    assert.is_true(r.elapsed <= 10)
  end)
end)

describe("policies/azure-batch.lua (Retry pattern: batch, more and longer)", function()
  local AB = policy("azure-batch")
  local NOMINAL = { 5, 10, 20, 40, 80, 120, 120, 120, 120 }
  azure_answers(AB, 5)
  equal_jitter(AB, NOMINAL)

  it("without jitter waits 5 s doubling to 120 s: 10 attempts in all", function()
    local w, r = testing.waits(AB, { set = NO_JITTER })
    assert.are.same(NOMINAL, w)
    assert.are.equal(10, r.attempts)
    assert.are.equal("exhausted", r.verdict)
    assert.are.equal(635, r.elapsed)
  end)

  it("gives one attempt 100 s and the whole call 1800 s", function()
    local t = lr.load(AB):tuning()
    assert.are.equal(100, t.attempt_timeout)
    assert.are.equal(1800, t.deadline)
    local r = testing.run(AB, { 200 }, { duration = 1000 })  -- every answer comes too late
    assert.are.equal(100, r.decisions[1].elapsed)
    assert.are.equal("exhausted", r.verdict)   -- 10 x 100 s + at most 635 s of waits
    assert.is_true(r.elapsed <= 1800)
  end)

  it("retries more and longer than the interactive and general tunings", function()
    local function t(name) return lr.load(policy(name)):tuning() end
    assert.is_true(t("azure-batch").max_attempts > t("azure").max_attempts)
    assert.is_true(t("azure").max_attempts > t("azure-interactive").max_attempts)
    assert.is_true(t("azure-batch").backoff.max > t("azure").backoff.max)
    assert.is_true(t("azure").backoff.initial > t("azure-interactive").backoff.initial)
  end)
end)

-- ------------------------------------------------- through the real engine

-- The request's idempotency and a workflow's re-run are decided by the
-- engine around the transport, which the Lua module cannot drive: these run
-- build/luaretry against the fault server.
describe("the policies through luaretry run", function()
  local proc = require "support.proc"
  local srv
  local FAST = { "--seed", "1", "--set", "backoff.jitter=none", "--set", "backoff.initial=0.01" }

  local function run(args)
    local t = { "run" }
    for _, a in ipairs(args) do t[#t + 1] = a end
    for _, a in ipairs(FAST) do t[#t + 1] = a end
    return proc.run(t, { timeout = 30 })
  end

  setup(function() srv = proc.server(FIX .. "t_faults.lua") end)
  teardown(function() if srv then srv:stop() end end)
  before_each(function() srv:reset() end)

  it("gcs: a PUT without a precondition is not repeated after a 503", function()
    local r = run { policy("gcs"), srv.base .. "/o/busy", "-X", "PUT", "-d", "data" }
    assert.are.equal(1, r.code, r.stderr)
    assert.are.equal(1, #srv:requests_on("/o/busy"))
    assert.matches("not idempotent", r.stderr)
  end)

  it("gcs: an object DELETE without a generation is not repeated; with one it is", function()
    local r = run { policy("gcs"), srv.base .. "/storage/v1/b/bkt/o/busy", "-X", "DELETE" }
    assert.are.equal(1, r.code, r.stderr)
    assert.are.equal(1, #srv:requests_on("/storage/v1/b/bkt/o/busy"))
    assert.matches("not idempotent", r.stderr)
    srv:reset()
    local g = run { policy("gcs"), srv.base .. "/storage/v1/b/bkt/o/busy?ifGenerationMatch=3",
                    "-X", "DELETE", "--set", "max_attempts=3" }
    assert.are.equal(4, g.code, g.stderr)
    assert.are.equal(3, #srv:requests_on("/storage/v1/b/bkt/o/busy"))
  end)

  it("gcs: a bucket insert (POST) is always repeated, a 408 too", function()
    local r = run { policy("gcs"), srv.base .. "/storage/v1/b?project=p", "-d", '{"name":"new"}',
                    "-H", "Content-Type: application/json" }
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(3, #srv:requests_on("/storage/v1/b"))
    assert.matches("attempt 1/10: 408 %-> retry", r.stderr)
  end)

  it("gcs: a PUT to a resumable upload session is repeated, with the whole body again", function()
    local url = srv.base .. "/upload/storage/v1/b/bkt/o?uploadType=resumable&upload_id=s1"
    local r = run { policy("gcs"), url, "-X", "PUT", "-d", "0123456789",
                    "-H", "Content-Range: bytes 0-9/10", "--set", "max_attempts=3" }
    assert.are.equal(4, r.code, r.stderr)
    local seen = srv:requests_on("/upload/storage/v1/b/bkt/o")
    assert.are.equal(3, #seen)
    for _, q in ipairs(seen) do assert.are.equal(10, q.body_len) end
  end)

  it("gcs: a PUT with ifGenerationMatch, or the header, is", function()
    local r = run { policy("gcs"), srv.base .. "/o/busy?ifGenerationMatch=0", "-X", "PUT",
                    "-d", "data", "--set", "max_attempts=3" }
    assert.are.equal(4, r.code, r.stderr)
    assert.are.equal(3, #srv:requests_on("/o/busy"))
    srv:reset()
    local h = run { policy("gcs"), srv.base .. "/o/busy", "-X", "PUT", "-d", "data",
                    "-H", "X-Goog-If-Generation-Match: 17", "--set", "max_attempts=3" }
    assert.are.equal(4, h.code, h.stderr)
    assert.are.equal(3, #srv:requests_on("/o/busy"))
  end)

  -- needs the engine's run() workflows
  it("iam: a 409 ABORTED re-runs the whole read-modify-write", function()
    local r = run { FIX .. "t_iam_workflow.lua", srv.base .. "/iam" }
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(2, #srv:requests_on("/iam:getIamPolicy"))
    assert.are.equal(2, #srv:requests_on("/iam:setIamPolicy"))
  end)
end)
