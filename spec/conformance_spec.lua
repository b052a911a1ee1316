-- Cloud Storage's retry conformance tests, run against policies/gcs.lua.
--
-- Google's client libraries all run one suite, storage/v1/retry_tests.json
-- of googleapis/conformance-tests, against the storage testbench: for each
-- scenario, each of its cases (a list of instructions such as "return-503",
-- "return-reset-connection") and each JSON API method it names, the runner
-- creates a Retry Test resource holding the instructions for that method,
-- performs the method through the library with the header
-- `x-retry-test-id`, and asserts two things: the call succeeded exactly when
-- the scenario says `expectSuccess`, and every instruction was consumed
-- (the Retry Test is `completed`), which proves the client sent the
-- requests it should have.  Here the client is `build/luaretry run
-- policies/gcs.lua URL ...`, one run per request, and the testbench is our
-- own fake, spec/conformance/testbench.lua, under `luaretry faults`
-- (its header says what it fakes and what it does not).
--
-- Every scenario and every method is run, each through the JSON API; the
-- object get and insert (and the download group) also through the XML API,
-- which the testbench serves for objects.  A failure must be a final answer
-- (exit 1): a retry the policy refused, or a non-retryable status.  Beyond
-- the runner's two checks, uploads and downloads check the bytes: the
-- object stored, or the file written, is the data, whole.
--
-- Where the client library makes several requests, so do we:
--   storage.resumable.upload   POST ...?uploadType=resumable (the session's
--                              initiation, itself a storage.objects.insert
--                              that a precondition makes retryable), then
--                              one PUT of the whole body to the session URI
--                              with Content-Range, retried as a whole (GCS
--                              ignores bytes it already has); python-storage
--                              would query the session and resume instead;
--   everything else            one request.
-- The backoff is shortened with --set (backoff.initial=0.001), so the whole
-- suite takes seconds; policies/gcs.lua is otherwise as shipped.
--
-- The suite itself is Google's data and is not kept in this repository (see
-- spec/conformance/README.md): the spec reads it from $LUARETRY_RETRY_TESTS,
-- spec/conformance/retry_tests.json, or shared/conformance/storage/v1/
-- retry_tests.json beside the checkout, and is pending when none is there.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
local proc = require "support.proc"

local GCS = proc.root .. "/policies/gcs.lua"
local TESTBENCH = here .. "/conformance/testbench.lua"
local FAST = { "--seed", "1", "--set", "backoff.initial=0.001", "--set", "backoff.jitter_max=0.001" }
local CURL = "env -u LD_PRELOAD curl -sS --max-time 20 "
local PROJECT = "my-project-id"
local SERVICE_ACCOUNT = "my-service-account@my-project-id.iam.gserviceaccount.com"
local J, U, D = "/storage/v1", "/upload/storage/v1", "/download/storage/v1"
local JSON = "Content-Type: application/json"

-- The SHA-256 of the copy this spec was written against (the file as of
-- googleapis/conformance-tests commit 998891a8dae00df121e460420cceb0abfc4e2ea1).
local KNOWN_SHA256 = "8b3bbfe1d73980b298d886a723178022dbc97abf12768e5333045851a3976325"

local function locate()
  local candidates = {
    os.getenv("LUARETRY_RETRY_TESTS"),
    here .. "/conformance/retry_tests.json",
    proc.root .. "/../shared/conformance/storage/v1/retry_tests.json",
  }
  for i = 1, 3 do  -- not ipairs: an unset variable leaves a hole at 1
    local path = candidates[i]
    if path and path ~= "" and proc.readfile(path) then return path end
  end
  return nil
end

-- ------------------------------------------------------------ the data

-- the testbench's bytes and digest: one module for both sides
local bytes = require "conformance.bytes"
local pattern, digest = bytes.pattern, bytes.digest

-- ------------------------------------------------------------ the methods

-- Each method: the fixture it needs, and the request(s) that perform it
-- with or without a precondition.  fx: the fixture set's names (from the
-- testbench), n: a number unique to the case.
local function acl(base)
  return {
    get = function(fx) return { { "GET", base(fx) .. "/" .. fx.acl_entity } } end,
    list = function(fx) return { { "GET", base(fx) } } end,
    delete = function(fx) return { { "DELETE", base(fx) .. "/" .. fx.acl_entity } } end,
    insert = function(fx)
      return { { "POST", base(fx), body = '{"entity":"user-' .. SERVICE_ACCOUNT .. '","role":"READER"}' } }
    end,
    patch = function(fx) return { { "PATCH", base(fx) .. "/" .. fx.acl_entity, body = '{"role":"OWNER"}' } } end,
    update = function(fx)
      return { { "PUT", base(fx) .. "/" .. fx.acl_entity,
                 body = '{"entity":"' .. fx.acl_entity .. '","role":"OWNER"}' } }
    end,
  }
end

local BUCKET_ACL = acl(function(fx) return J .. "/b/" .. fx.bucket .. "/acl" end)
local DEFAULT_ACL = acl(function(fx) return J .. "/b/" .. fx.bucket .. "/defaultObjectAcl" end)
local OBJECT_ACL = acl(function(fx) return J .. "/b/" .. fx.bucket .. "/o/" .. fx.object .. "/acl" end)

local function when(pre, q) return pre and q or nil end

local METHODS = {
  ["storage.buckets.delete"] = { fixture = { empty = true },
    run = function(fx) return { { "DELETE", J .. "/b/" .. fx.bucket } } end },
  ["storage.buckets.get"] = { run = function(fx) return { { "GET", J .. "/b/" .. fx.bucket } } end },
  ["storage.buckets.getIamPolicy"] = {
    run = function(fx) return { { "GET", J .. "/b/" .. fx.bucket .. "/iam" } } end },
  ["storage.buckets.insert"] = {
    run = function(_, _, n)
      return { { "POST", J .. "/b", query = "project=" .. PROJECT, body = '{"name":"new-bucket-' .. n .. '"}' } }
    end },
  ["storage.buckets.list"] = { run = function() return { { "GET", J .. "/b", query = "project=" .. PROJECT } } end },
  ["storage.buckets.lockRetentionPolicy"] = {
    run = function(fx)  -- ifMetagenerationMatch is required by the API, not a choice
      return { { "POST", J .. "/b/" .. fx.bucket .. "/lockRetentionPolicy",
                 query = "ifMetagenerationMatch=" .. fx.bucket_metageneration } }
    end },
  ["storage.buckets.patch"] = {
    run = function(fx, pre)
      return { { "PATCH", J .. "/b/" .. fx.bucket, body = '{"storageClass":"COLDLINE"}',
                 query = when(pre, "ifMetagenerationMatch=" .. fx.bucket_metageneration) } }
    end },
  ["storage.buckets.setIamPolicy"] = {
    run = function(fx, pre)
      local etag = pre and (',"etag":"' .. fx.iam_etag .. '"') or ""
      return { { "PUT", J .. "/b/" .. fx.bucket .. "/iam",
                 body = '{"bindings":[{"role":"roles/storage.objectViewer","members":["serviceAccount:'
                        .. SERVICE_ACCOUNT .. '"]}]' .. etag .. '}' } }
    end },
  ["storage.buckets.testIamPermissions"] = {
    run = function(fx)
      return { { "GET", J .. "/b/" .. fx.bucket .. "/iam/testPermissions",
                 query = "permissions=storage.buckets.get&permissions=storage.buckets.create" } }
    end },
  ["storage.buckets.update"] = {
    run = function(fx, pre)
      return { { "PUT", J .. "/b/" .. fx.bucket, body = '{"name":"' .. fx.bucket .. '","storageClass":"STANDARD"}',
                 query = when(pre, "ifMetagenerationMatch=" .. fx.bucket_metageneration) } }
    end },
  ["storage.bucket_acl.get"] = { run = BUCKET_ACL.get },
  ["storage.bucket_acl.list"] = { run = BUCKET_ACL.list },
  ["storage.bucket_acl.delete"] = { run = BUCKET_ACL.delete },
  ["storage.bucket_acl.insert"] = { run = BUCKET_ACL.insert },
  ["storage.bucket_acl.patch"] = { run = BUCKET_ACL.patch },
  ["storage.bucket_acl.update"] = { run = BUCKET_ACL.update },
  ["storage.default_object_acl.get"] = { run = DEFAULT_ACL.get },
  ["storage.default_object_acl.list"] = { run = DEFAULT_ACL.list },
  ["storage.default_object_acl.delete"] = { run = DEFAULT_ACL.delete },
  ["storage.default_object_acl.insert"] = { run = DEFAULT_ACL.insert },
  ["storage.default_object_acl.patch"] = { run = DEFAULT_ACL.patch },
  ["storage.default_object_acl.update"] = { run = DEFAULT_ACL.update },
  ["storage.object_acl.get"] = { run = OBJECT_ACL.get },
  ["storage.object_acl.list"] = { run = OBJECT_ACL.list },
  ["storage.object_acl.delete"] = { run = OBJECT_ACL.delete },
  ["storage.object_acl.insert"] = { run = OBJECT_ACL.insert },
  ["storage.object_acl.patch"] = { run = OBJECT_ACL.patch },
  ["storage.object_acl.update"] = { run = OBJECT_ACL.update },
  ["storage.hmacKey.create"] = {
    run = function()
      return { { "POST", J .. "/projects/" .. PROJECT .. "/hmacKeys",
                 query = "serviceAccountEmail=" .. SERVICE_ACCOUNT:gsub("@", "%%40") } }
    end },
  ["storage.hmacKey.delete"] = { fixture = { hmac_state = "INACTIVE" },
    run = function(fx) return { { "DELETE", J .. "/projects/" .. PROJECT .. "/hmacKeys/" .. fx.hmac } } end },
  ["storage.hmacKey.get"] = {
    run = function(fx) return { { "GET", J .. "/projects/" .. PROJECT .. "/hmacKeys/" .. fx.hmac } } end },
  ["storage.hmacKey.list"] = {
    run = function() return { { "GET", J .. "/projects/" .. PROJECT .. "/hmacKeys" } } end },
  ["storage.hmacKey.update"] = {
    run = function(fx, pre)
      local etag = pre and (',"etag":"' .. fx.hmac_etag .. '"') or ""
      return { { "PUT", J .. "/projects/" .. PROJECT .. "/hmacKeys/" .. fx.hmac,
                 body = '{"state":"INACTIVE"' .. etag .. '}' } }
    end },
  ["storage.notifications.delete"] = {
    run = function(fx) return { { "DELETE", J .. "/b/" .. fx.bucket .. "/notificationConfigs/" .. fx.notification } } end },
  ["storage.notifications.get"] = {
    run = function(fx) return { { "GET", J .. "/b/" .. fx.bucket .. "/notificationConfigs/" .. fx.notification } } end },
  ["storage.notifications.insert"] = {
    run = function(fx)
      return { { "POST", J .. "/b/" .. fx.bucket .. "/notificationConfigs",
                 body = '{"topic":"projects/' .. PROJECT .. '/topics/my-topic-name","payload_format":"JSON_API_V1"}' } }
    end },
  ["storage.notifications.list"] = {
    run = function(fx) return { { "GET", J .. "/b/" .. fx.bucket .. "/notificationConfigs" } } end },
  ["storage.objects.compose"] = {
    run = function(fx, pre)
      return { { "POST", J .. "/b/" .. fx.bucket .. "/o/" .. fx.object .. "/compose",
                 body = '{"sourceObjects":[{"name":"part"}],"destination":{"contentType":"text/plain"}}',
                 query = when(pre, "ifGenerationMatch=" .. fx.generation) } }
    end },
  ["storage.objects.copy"] = {
    run = function(fx, pre)
      return { { "POST", J .. "/b/" .. fx.bucket .. "/o/" .. fx.object .. "/copyTo/b/" .. fx.bucket .. "/o/copy",
                 query = when(pre, "ifGenerationMatch=0") } }
    end },
  ["storage.objects.delete"] = {
    run = function(fx, pre)
      return { { "DELETE", J .. "/b/" .. fx.bucket .. "/o/" .. fx.object,
                 query = when(pre, "ifGenerationMatch=" .. fx.generation) } }
    end },
  ["storage.objects.get"] = {
    run = function(fx) return { { "GET", J .. "/b/" .. fx.bucket .. "/o/" .. fx.object } } end,
    xml = function(fx) return { { "GET", "/" .. fx.bucket .. "/" .. fx.object, expect = "hello world" } } end },
  ["storage.objects.insert"] = {
    run = function(fx, pre)
      return { { "POST", U .. "/b/" .. fx.bucket .. "/o",
                 query = "uploadType=media&name=new" .. (pre and "&ifGenerationMatch=0" or ""),
                 body = "hello world", stored = { "new", "hello world" } } }
    end,
    xml = function(fx, pre)
      return { { "PUT", "/" .. fx.bucket .. "/new", body = "hello world", stored = { "new", "hello world" },
                 headers = pre and { "x-goog-if-generation-match: 0" } or nil } }
    end },
  ["storage.objects.list"] = { run = function(fx) return { { "GET", J .. "/b/" .. fx.bucket .. "/o" } } end },
  ["storage.objects.patch"] = {
    run = function(fx, pre)
      return { { "PATCH", J .. "/b/" .. fx.bucket .. "/o/" .. fx.object, body = '{"metadata":{"foo":"bar"}}',
                 query = when(pre, "ifMetagenerationMatch=" .. fx.metageneration) } }
    end },
  ["storage.objects.rewrite"] = {
    run = function(fx, pre)
      return { { "POST", J .. "/b/" .. fx.bucket .. "/o/" .. fx.object .. "/rewriteTo/b/" .. fx.bucket .. "/o/rewritten",
                 query = when(pre, "ifGenerationMatch=0") } }
    end },
  ["storage.objects.update"] = {
    run = function(fx, pre)
      return { { "PUT", J .. "/b/" .. fx.bucket .. "/o/" .. fx.object, body = '{"metadata":{"foo":"bar"}}',
                 query = when(pre, "ifMetagenerationMatch=" .. fx.metageneration) } }
    end },
  ["storage.serviceaccount.get"] = {
    run = function() return { { "GET", J .. "/projects/" .. PROJECT .. "/serviceAccount" } } end },
}

-- The groups: how a library performs an upload or a download.
local GROUPS = {
  ["storage.resumable.upload"] = {
    run = function(fx, pre, _, size)
      return {
        { "POST", U .. "/b/" .. fx.bucket .. "/o",
          query = "uploadType=resumable&name=big" .. (pre and "&ifGenerationMatch=0" or ""),
          body = '{"name":"big"}', headers = { "X-Upload-Content-Length: " .. size },
          session = true },
        { "PUT", nil, body_size = size, headers = { ("Content-Range: bytes 0-%d/%d"):format(size - 1, size) },
          stored = { "big", size } },
      }
    end,
    xml = function(fx, pre, _, size)
      return {
        { "POST", "/" .. fx.bucket .. "/big", session = true,
          headers = { "x-goog-resumable: start", pre and "x-goog-if-generation-match: 0" or nil } },
        { "PUT", nil, body_size = size, headers = { ("Content-Range: bytes 0-%d/%d"):format(size - 1, size) },
          stored = { "big", size } },
      }
    end },
  ["storage.objects.download"] = { fixture = { size = 1048576 + 4097 },
    run = function(fx) return { { "GET", D .. "/b/" .. fx.bucket .. "/o/" .. fx.object, query = "alt=media", download = true } } end,
    xml = function(fx) return { { "GET", "/" .. fx.bucket .. "/" .. fx.object, download = true } } end },
}

-- ------------------------------------------------------------ the cases

local function load_suite(path)
  local text = assert(proc.readfile(path))
  local doc = assert(proc.json.decode(text), "retry_tests.json: not JSON")
  assert(type(doc.retryTests) == "table", "retry_tests.json: no retryTests")
  return doc.retryTests, text
end

-- One entry per scenario x case x method (x API): what to run and expect.
local function build_cases(scenarios)
  local cases = {}
  for _, sc in ipairs(scenarios) do
    for ci, case in ipairs(sc.cases) do
      for _, m in ipairs(sc.methods) do
        local group = m.group or m.name
        local spec = GROUPS[group] or METHODS[group]
        for _, api in ipairs { "json", "xml" } do
          local steps = api == "json" and spec and spec.run or spec and spec.xml
          if api == "json" or steps then
            cases[#cases + 1] = {
              scenario = sc, case_index = ci, instructions = case.instructions, method = m.name,
              group = group, api = api, spec = spec, steps = steps,
              name = ("S%d %s: %s%s #%d %s"):format(sc.id, sc.description, group,
                                                   api == "xml" and " (XML API)" or "", ci - 1,
                                                   table.concat(case.instructions, ", ")),
            }
          end
        end
      end
    end
  end
  return cases
end

-- ------------------------------------------------------------ the spec

local SUITE = locate()

describe("Cloud Storage retry conformance (policies/gcs.lua)", function()
  if not SUITE then
    pending("no retry_tests.json: set LUARETRY_RETRY_TESTS, or see spec/conformance/README.md")
    return
  end
  local scenarios, text = load_suite(SUITE)
  local cases = build_cases(scenarios)
  local srv, tmp, fixtures, test_ids
  local tally = { passed = 0 }

  local function curl(args)
    return proc.readfile_cmd(CURL .. args)
  end

  -- python-storage uploads 9 MiB, above the policy's 8 MiB memory limit:
  -- the script must see the length and the first body_limit bytes only
  local UPLOAD_SIZE = 9 * 1048576

  setup(function()
    srv = proc.server(TESTBENCH)
    tmp = proc.tmpdir()
    -- one fixture set per case, in one request
    local sets = {}
    for i, c in ipairs(cases) do sets[i] = c.spec and c.spec.fixture or {} end
    local body = proc.json.encode({ sets = sets }):gsub('"sets":{}', '"sets":[]')
    proc.writefile(tmp .. "/fixtures.json", body)
    local got = proc.json.decode(curl("-X POST --data-binary @" .. proc.q(tmp .. "/fixtures.json") ..
                                      " " .. proc.q(srv.base .. "/_conformance/fixtures")))
    fixtures = assert(got and got.sets, "the testbench made no fixtures")
    -- every Retry Test, created in one curl run (one POST /retry_test each)
    local cfg = {}
    for _, c in ipairs(cases) do
      local instr = proc.json.encode({ instructions = { [c.method] = c.instructions } })
      cfg[#cfg + 1] = 'url = "' .. srv.base .. '/retry_test"\nheader = "' .. JSON .. '"\n' ..
                      'data = "' .. instr:gsub('\\', '\\\\'):gsub('"', '\\"') .. '"\n'
    end
    proc.writefile(tmp .. "/create.cfg", table.concat(cfg, "next\n"))
    test_ids = {}
    for line in curl("-K " .. proc.q(tmp .. "/create.cfg")):gmatch("[^\n]+") do
      local t = proc.json.decode(line)
      test_ids[#test_ids + 1] = t and t.id
    end
    assert(#test_ids == #cases, ("created %d Retry Tests for %d cases"):format(#test_ids, #cases))
    -- the bytes uploads send
    proc.writefile(tmp .. "/upload-small.bin", pattern(1048576 + 4097))
    proc.writefile(tmp .. "/upload-9M.bin", pattern(9 * 1048576))
  end)

  teardown(function()
    if srv then srv:stop() end
    proc.rmtree(tmp)
    print(("\nconformance: %d scenarios, %d cases x methods (JSON and XML API): %d passed")
          :format(#scenarios, #cases, tally.passed))
  end)

  it("reads the suite it was written against (or says which it reads)", function()
    assert.are.equal(8, #scenarios)
    local sha = proc.readfile_cmd("sha256sum " .. proc.q(SUITE)):match("^(%x+)")
    if sha ~= KNOWN_SHA256 then
      print("\nnote: " .. SUITE .. " differs from the copy this spec was written against (" ..
            KNOWN_SHA256:sub(1, 12) .. "...): " .. (sha or "?"))
    end
    assert.is_true(#text > 0)
    -- the README's figure: 315 runs through the JSON API, 22 through the XML API
    if sha == KNOWN_SHA256 then assert.are.equal(337, #cases) end
  end)

  -- One run of build/luaretry for one step; returns its result.
  local function run_step(step, tid, c, i, size)
    local url = srv.base .. step[2]
    if step.query then url = url .. "?" .. step.query end
    local args = { "run", GCS, url, "-X", step[1], "-H", "x-retry-test-id: " .. tid }
    for _, h in ipairs(step.headers or {}) do args[#args + 1] = "-H"; args[#args + 1] = h end
    if step.body then
      args[#args + 1] = "-H"; args[#args + 1] = step.body:sub(1, 1) == "{" and JSON
                                                  or "Content-Type: text/plain"
      args[#args + 1] = "-d"; args[#args + 1] = step.body
    elseif step.body_size then
      args[#args + 1] = "--data-binary"  -- as it is: -d would drop the file's CR and LF bytes, as curl's does
      args[#args + 1] = "@" .. tmp .. (size == 9 * 1048576 and "/upload-9M.bin" or "/upload-small.bin")
    end
    local out = tmp .. "/out-" .. i
    if step.download then args[#args + 1] = "-o"; args[#args + 1] = out end
    for _, a in ipairs(FAST) do args[#args + 1] = a end
    local r = proc.run(args, { timeout = 60 })
    r.out = out
    return r
  end

  for i, c in ipairs(cases) do
    it(c.name, function()
      local size = c.group == "storage.resumable.upload" and UPLOAD_SIZE or nil
      local fx, tid = fixtures[i], test_ids[i]
      assert.is_truthy(tid, "no Retry Test")
      local pre = c.scenario.preconditionProvided
      local steps = c.steps(fx, pre, i, size)
      local code, log = 0, {}
      local session
      for _, step in ipairs(steps) do
        if step[2] == nil then step[2] = assert(session, "no session URI") end
        local r = run_step(step, tid, c, i, size)
        log[#log + 1] = table.concat({ step[1], step[2], "->", tostring(r.code), r.stderr or "" }, " ")
        code = r.code
        if code ~= 0 then break end
        if step.session then
          local doc = proc.json.decode(r.stdout or "")
          session = doc and doc.location and doc.location:gsub("^https?://[^/]+", "")
        end
        if step.download then
          local want = pattern(fx.size)
          local got = proc.readfile(r.out) or ""
          assert.are.equal(#want, #got, "downloaded bytes")
          assert.is_true(want == got, "the downloaded bytes differ")
        end
        if step.expect then assert.are.equal(step.expect, r.stdout) end
        if step.stored then
          local name, what = step.stored[1], step.stored[2]
          local st = proc.json.decode(proc.http("GET", srv.base .. "/_conformance/object/" .. fx.bucket .. "/" .. name))
          local data = type(what) == "number" and pattern(what) or what
          assert.are.equal(#data, st and st.size, "stored size")
          assert.are.equal(digest(data), st.digest, "stored bytes")
        end
      end
      local trace = table.concat(log, "\n")
      if c.scenario.expectSuccess then
        assert.are.equal(0, code, "expected success:\n" .. trace)
      else
        assert.are.equal(1, code, "expected a final failure (exit 1):\n" .. trace)
      end
      local status = proc.json.decode(proc.http("GET", srv.base .. "/retry_test/" .. tid))
      assert.is_true(status and status.completed == true,
                     "instructions left unused: " .. proc.json.encode(status and status.instructions or {})
                     .. "\n" .. trace)
      tally.passed = tally.passed + 1
    end)
  end
end)
