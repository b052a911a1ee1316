-- spec/conformance/testbench.lua: a small fake of Google's storage
-- testbench, as a script for `luaretry faults`, for spec/conformance_spec.lua.
--
--   build/luaretry faults --listen 127.0.0.1:0 spec/conformance/testbench.lua
--
-- What it fakes (written from the testbench's documented behaviour, not
-- from its code):
--
-- The Retry Test resource, the way Google's client libraries run the
-- Cloud Storage retry conformance tests:
--   POST /retry_test     {"instructions": {"storage.objects.get": ["return-503", ...]}}
--                        -> {"id": ..., "instructions": {...}, "completed": false,
--                            "transport": "HTTP"}
--   GET /retry_test/ID   the same, as consumed so far: "completed" turns true
--                        when every instruction of every method was used
--   DELETE /retry_test/ID, GET /retry_tests
-- A request carrying `x-retry-test-id: ID` whose operation (the JSON API
-- method name, e.g. "storage.buckets.get") still has instructions meets the
-- first of them:
--   return-NNN              answered NNN at once, the operation not done;
--                           the instruction is used
--   return-reset-connection the connection is reset, nothing sent; used
--   return-broken-stream    the real answer's head and 4 bytes of its body,
--                           then the connection closes; used once the 4
--                           bytes are out (a body of 4 bytes or less goes
--                           out whole and leaves it unused, as the testbench)
--   return-broken-stream-after-NK
--                           the same after N KiB (object downloads only)
--   return-NNN-after-MK     uploads only: a resumable upload's chunk keeps
--                           its first M KiB and is answered NNN; a single
--                           request upload of M KiB or more is answered NNN;
--                           other requests pass it by, unused
-- Any other instruction is refused when the Retry Test is created (400).
--
-- The JSON API (under /storage/v1, /upload/storage/v1, /download/storage/v1)
-- for every operation the conformance tests name: buckets (insert, get,
-- list, patch, update, delete, getIamPolicy, setIamPolicy,
-- testIamPermissions, lockRetentionPolicy), bucket ACLs and default object
-- ACLs, objects (get as metadata or ?alt=media, list, insert as media,
-- multipart or resumable upload, patch, update, delete, compose, copyTo,
-- rewriteTo), object ACLs, notifications, HMAC keys and the service
-- account; and the XML API's object GET, PUT and POST (/BUCKET/OBJECT).
-- Preconditions are checked (ifGenerationMatch, ifGenerationNotMatch,
-- ifMetagenerationMatch, generation, x-goog-if-generation-match, an etag in
-- a setIamPolicy or HMAC key update body): a failed one is a 412.  A
-- resumable upload's chunks are kept as GCS keeps them: bytes already
-- persisted are ignored when sent again, a chunk that does not finish the
-- object is answered 308 with its Range.
--
-- Not faked: authentication and permission checks, projects other than
-- their name, object versioning (deleted is gone), CSEK, checksums and
-- x-goog-hash, soft delete, folders and managed folders, gRPC, the XML API's
-- buckets, ACLs and multipart uploads, the instructions for stalls
-- (stall-*), redirects and gRPC (redirect-*, *-if-dp-enforced), and
-- return-broken-stream-final-chunk-after-NB.  Timings are not modelled: an
-- answer comes at once.
--
-- One place departs from GCS on purpose: the answer to a resumable upload's
-- initiation carries the session URI in its body as well as in `Location`
-- ({"location": ...}), because `luaretry run` cannot show response headers.
--
-- For the spec's own set-up, outside the API:
--   POST /_conformance/fixtures  {"sets": [{"empty": true, "hmac_state": "INACTIVE",
--                                  "size": 1048576}, ...]}
--     makes one bucket per set (with an object "o" of "hello world", or
--     of `size` bytes of a fixed pattern, and a one-byte object "part",
--     unless "empty"), an HMAC key and a notification, and answers their
--     names, generations and etags;
--   GET /_conformance/object/BUCKET/NAME  the stored object's size and a
--     digest of its bytes (FNV-1a 64 over 8-byte words, hex), or 404.

local json = require "dkjson"

-- ------------------------------------------------------------------ state

local tests, test_order, next_test = {}, {}, 0
local buckets = {}        -- name -> bucket
local hmac_keys = {}      -- access id -> key
local uploads = {}        -- upload id -> upload
local counter = 0         -- ids, generations, etags

local function fresh()
  counter = counter + 1
  return counter
end

local PROJECT = "my-project-id"
local SERVICE_ACCOUNT = "my-service-account@my-project-id.iam.gserviceaccount.com"

-- ------------------------------------------------------------------ helpers

local function enc(v) return json.encode(v) end

-- A list that encodes as a JSON array even when empty.
local ARRAY = { __jsontype = "array" }
local function arr(t) return setmetatable(t or {}, ARRAY) end

local function reply(status, value, headers)
  local h = headers or {}
  h["Content-Type"] = h["Content-Type"] or "application/json; charset=UTF-8"
  return { status = status, body = value == nil and "" or enc(value) .. "\n", headers = h }
end

local function fail(status, message)
  return reply(status, { error = { code = status, message = message,
                                   errors = { { message = message } } } })
end

local function unescape(s)
  return (s:gsub("+", " "):gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

local function parse_query(q)
  local t = {}
  for pair in (q or ""):gmatch("[^&]+") do
    local k, v = pair:match("^([^=]*)=?(.*)$")
    k = unescape(k)
    if t[k] == nil then t[k] = unescape(v) end
  end
  return t
end

local function decode_body(body)
  if body == nil or body == "" then return {} end
  local v = json.decode(body)
  if type(v) ~= "table" then return nil end
  return v
end

-- the bytes uploads carry, and their digest (bytes.lua)
local bytes = require "bytes"
local pattern, digest = bytes.pattern, bytes.digest

local function etag() return "CA" .. fresh() .. "=" end

-- ------------------------------------------------------------------ resources

local function new_bucket(name)
  local b = { name = name, metageneration = 1, objects = {}, acl = {}, default_acl = {},
              notifications = {}, iam = { version = 1, bindings = arr(), etag = etag() },
              storage_class = "STANDARD", locked = false }
  b.acl["project-owners-" .. PROJECT] = "OWNER"
  b.default_acl["project-owners-" .. PROJECT] = "OWNER"
  buckets[name] = b
  return b
end

local function bucket_json(b)
  return { kind = "storage#bucket", id = b.name, name = b.name, projectNumber = "123456789",
           metageneration = tostring(b.metageneration), storageClass = b.storage_class,
           location = "US", etag = "CAE" .. b.metageneration .. "=",
           retentionPolicy = b.retention and { retentionPeriod = tostring(b.retention),
                                               isLocked = b.locked } or nil }
end

local function put_object(b, name, data, extra)
  local o = { name = name, data = data, generation = fresh(), metageneration = 1,
              acl = { ["project-owners-" .. PROJECT] = "OWNER" }, metadata = extra or {} }
  b.objects[name] = o
  return o
end

local function object_json(b, o)
  return { kind = "storage#object", id = b.name .. "/" .. o.name .. "/" .. o.generation,
           bucket = b.name, name = o.name, generation = tostring(o.generation),
           metageneration = tostring(o.metageneration), size = tostring(#o.data),
           contentType = "application/octet-stream", storageClass = "STANDARD",
           metadata = next(o.metadata) and o.metadata or nil,
           etag = "CL" .. o.generation .. o.metageneration .. "=" }
end

local function acl_json(kind, entity, role)
  return { kind = kind, entity = entity, role = role }
end

local function hmac_json(k)
  return { kind = "storage#hmacKeyMetadata", id = PROJECT .. "/" .. k.id, accessId = k.id,
           projectId = PROJECT, serviceAccountEmail = k.email, state = k.state, etag = k.etag }
end

-- The object preconditions of a JSON API request, against o (nil: absent).
-- Returns a 412 answer when one fails.
local function check_generation(q, o)
  local m = q.ifGenerationMatch
  if m then
    local want = tonumber(m)
    if want == 0 and o then return fail(412, "ifGenerationMatch=0: the object exists") end
    if want ~= 0 and (not o or o.generation ~= want) then
      return fail(412, "ifGenerationMatch: generation does not match")
    end
  end
  local n = q.ifGenerationNotMatch
  if n and o and o.generation == tonumber(n) then
    return fail(412, "ifGenerationNotMatch: generation matches")
  end
  if q.generation and o and o.generation ~= tonumber(q.generation) then
    return fail(404, "no such generation")
  end
  return nil
end

local function check_metageneration(q, thing)
  local m = q.ifMetagenerationMatch
  if m and (not thing or thing.metageneration ~= tonumber(m)) then
    return fail(412, "ifMetagenerationMatch: metageneration does not match")
  end
  return nil
end

-- ------------------------------------------------------------------ retry tests

local KNOWN = {
  "^return%-%d+$", "^return%-reset%-connection$", "^return%-broken%-stream$",
  "^return%-broken%-stream%-after%-%d+K$", "^return%-%d+%-after%-%d+K$",
}

local function valid_instruction(s)
  if type(s) ~= "string" then return false end
  for _, p in ipairs(KNOWN) do
    if s:find(p) then return true end
  end
  return false
end

local function test_json(t)
  return { id = t.id, instructions = t.instructions, completed = t.completed, transport = "HTTP" }
end

local function create_test(body)
  local doc = decode_body(body)
  if not doc or type(doc.instructions) ~= "table" then
    return fail(400, "expected {\"instructions\": {METHOD: [INSTRUCTION, ...]}}")
  end
  local instructions = {}
  for method, list in pairs(doc.instructions) do
    if type(method) ~= "string" or not method:find("^storage%.") or type(list) ~= "table" then
      return fail(400, "the requested method <" .. tostring(method) .. "> for fault injection")
    end
    local copy = {}
    for i, s in ipairs(list) do
      if not valid_instruction(s) then
        return fail(400, "the fault injection request <" .. tostring(s) .. ">")
      end
      copy[i] = s
    end
    instructions[method] = arr(copy)
  end
  next_test = next_test + 1
  local id = string.format("%032x", next_test * 2654435761)
  local t = { id = id, instructions = instructions, completed = false }
  tests[id] = t
  test_order[#test_order + 1] = id
  return reply(200, test_json(t))
end

-- The next instruction for this request's operation, or nil.
local function peek(req, method)
  local id = req.headers["x-retry-test-id"]
  local t = id and tests[id]
  local list = t and t.instructions[method]
  if list and #list > 0 then return list[1], t end
  return nil
end

local function dequeue(t, method)
  table.remove(t.instructions[method], 1)
  for _, list in pairs(t.instructions) do
    if #list > 0 then return end
  end
  t.completed = true
end

-- ------------------------------------------------------------------ the JSON API

local function find_bucket(name)
  local b = buckets[name]
  if not b then return nil, fail(404, "bucket " .. tostring(name) .. " not found") end
  return b
end

local function find_object(b, name)
  local o = b.objects[name]
  if not o then return nil, fail(404, "object " .. tostring(name) .. " not found") end
  return o
end

-- ACL collections: map of entity -> role on some resource.
local function acl_op(m, map, entity, body, kind)
  if not entity then
    if m == "GET" then
      local items = {}
      for e, r in pairs(map) do items[#items + 1] = acl_json(kind, e, r) end
      table.sort(items, function(a, b) return a.entity < b.entity end)
      return reply(200, { kind = kind .. "s", items = arr(items) })
    end
    local doc = decode_body(body)
    if not doc or not doc.entity then return fail(400, "entity required") end
    map[doc.entity] = doc.role or "READER"
    return reply(200, acl_json(kind, doc.entity, map[doc.entity]))
  end
  if m == "GET" then
    if not map[entity] then return fail(404, "no ACL entry for " .. entity) end
    return reply(200, acl_json(kind, entity, map[entity]))
  elseif m == "DELETE" then
    if not map[entity] then return fail(404, "no ACL entry for " .. entity) end
    map[entity] = nil
    return { status = 204 }
  end
  local doc = decode_body(body)
  if not doc then return fail(400, "bad JSON") end
  map[entity] = doc.role or map[entity] or "READER"
  return reply(200, acl_json(kind, entity, map[entity]))
end

local ACL_KIND = { acl = "storage#bucketAccessControl",
                   defaultObjectAcl = "storage#objectAccessControl" }
local ACL_OP = { acl = "storage.bucket_acl", defaultObjectAcl = "storage.default_object_acl" }

local function crud(m, has_entity)
  if m == "GET" then return has_entity and "get" or "list" end
  if m == "POST" and not has_entity then return "insert" end
  if m == "PUT" then return "update" end
  if m == "PATCH" or m == "POST" then return "patch" end
  if m == "DELETE" then return "delete" end
  return nil
end

-- Multipart/related upload body: the JSON metadata part, then the media.
local function multipart(req)
  local ctype = req.headers["content-type"] or ""
  local boundary = ctype:match('boundary="?([^";]+)"?')
  if not boundary then return nil end
  local parts = {}
  local delim = "--" .. boundary
  local pos = 1
  while true do
    local s, e = req.body:find(delim, pos, true)
    if not s then break end
    if req.body:sub(e + 1, e + 2) == "--" then break end
    local head_end = req.body:find("\r\n\r\n", e, true)
    if not head_end then break end
    local next_s = req.body:find("\r\n" .. delim, head_end + 4, true)
    if not next_s then break end
    parts[#parts + 1] = req.body:sub(head_end + 4, next_s - 1)
    pos = next_s + 2
  end
  if #parts < 2 then return nil end
  return decode_body(parts[1]), parts[2]
end

-- The session URI of a resumable upload.
local function session_uri(req, b, id)
  local host = req.headers.host or "127.0.0.1"
  return "http://" .. host .. "/upload/storage/v1/b/" .. b.name ..
         "/o?uploadType=resumable&upload_id=" .. id
end

local function finish_upload(u)
  local b = buckets[u.bucket]
  if not b then return fail(404, "bucket gone") end
  local pre = check_generation(u.query, b.objects[u.name])
  if pre then return pre end
  u.complete = true
  u.object = put_object(b, u.name, table.concat(u.media))
  return reply(200, object_json(b, u.object))
end

-- A chunk (or the whole) of a resumable upload: PUT ?upload_id=.
local function upload_chunk(req, q)
  local u = uploads[q.upload_id]
  if not u then return fail(404, "no such upload") end
  if u.complete then return reply(200, object_json(buckets[u.bucket], u.object)) end
  local have = u.size
  local range = req.headers["content-range"]
  local first, last, total
  if range then
    local a, b2, t = range:match("^bytes%s+(%d+)%-(%d+)/([%d*]+)")
    if a then
      first, last, total = tonumber(a), tonumber(b2), tonumber(t)
    else
      t = range:match("^bytes%s+%*/([%d*]+)")
      if not t then return fail(400, "bad Content-Range " .. range) end
      total = tonumber(t)
      if total and total == have then return finish_upload(u) end
      if have == 0 then return { status = 308 } end
      return { status = 308, headers = { Range = "bytes=0-" .. (have - 1) } }
    end
  else
    first, last, total = 0, #req.body - 1, #req.body
  end
  if last - first + 1 ~= #req.body then return fail(400, "Content-Range does not match the body") end
  -- return-NNN-after-MK: keep the bytes up to M KiB, then fail
  local ins, t = peek(req, "storage.objects.insert")
  local code, kib = (ins or ""):match("^return%-(%d+)%-after%-(%d+)K$")
  local data = req.body
  if code then
    local after = tonumber(kib) * 1024
    if after > have and after <= last + 1 then
      if first < after then
        local from = math.max(have, first)
        u.media[#u.media + 1] = data:sub(from - first + 1, after - first)
        u.size = after
      end
      dequeue(t, "storage.objects.insert")
      return fail(tonumber(code), "Fault injected during a resumable upload")
    end
  end
  -- bytes GCS already has are ignored when sent again
  if first > have then return fail(400, "a gap: " .. have .. " bytes persisted, chunk starts at " .. first) end
  if last + 1 > have then
    u.media[#u.media + 1] = data:sub(have - first + 1)
    u.size = last + 1
  end
  if total and u.size >= total then return finish_upload(u) end
  return { status = 308, headers = { Range = "bytes=0-" .. (u.size - 1) } }
end

-- objects.insert by POST to /upload/storage/v1/b/B/o (or /storage/v1/b/B/o).
local function insert_object(req, b, q)
  local kind = q.uploadType or "media"
  if kind == "resumable" then
    local doc = decode_body(req.body) or {}
    local name = q.name or doc.name
    if not name then return fail(400, "name required") end
    local id = string.format("%x", fresh() * 40503)
    uploads[id] = { bucket = b.name, name = name, query = q, media = {}, size = 0 }
    local uri = session_uri(req, b, id)
    return reply(200, { location = uri }, { Location = uri })
  end
  local name, media = q.name, req.body
  if kind == "multipart" then
    local meta
    meta, media = multipart(req)
    if not media then return fail(400, "bad multipart body") end
    name = name or (meta and meta.name)
  end
  if not name then return fail(400, "name required") end
  local ins, t = peek(req, "storage.objects.insert")
  local code, kib = (ins or ""):match("^return%-(%d+)%-after%-(%d+)K$")
  if code and #media >= tonumber(kib) * 1024 then
    dequeue(t, "storage.objects.insert")
    return fail(tonumber(code), "Fault injected during a single-shot upload")
  end
  local pre = check_generation(q, b.objects[name])
  if pre then return pre end
  return reply(200, object_json(b, put_object(b, name, media)))
end

local function copy_object(b, o, dst_bucket, dst_name, q, rewrite)
  local db, err = find_bucket(dst_bucket)
  if not db then return err end
  local pre = check_generation(q, db.objects[dst_name])
  if pre then return pre end
  local new = put_object(db, dst_name, o.data)
  if rewrite then
    return reply(200, { kind = "storage#rewriteResponse", done = true,
                        totalBytesRewritten = tostring(#o.data), objectSize = tostring(#o.data),
                        resource = object_json(db, new) })
  end
  return reply(200, object_json(db, new))
end

-- The operation of a JSON API request, and the function that performs it.
local function json_route(req, seg, q, prefix)
  local m = req.method
  local over = req.headers["x-http-method-override"]
  if m == "POST" and over then m = over:upper() end
  local n = #seg
  if seg[1] == "projects" and seg[3] == "hmacKeys" then
    local id = seg[4]
    local op = crud(m, id ~= nil)
    if not op or n > 4 then return nil end
    return "storage.hmacKey." .. (op == "insert" and "create" or op), function()
      if op == "list" then
        local items = {}
        for _, k in pairs(hmac_keys) do items[#items + 1] = hmac_json(k) end
        table.sort(items, function(a, b) return a.accessId < b.accessId end)
        return reply(200, { kind = "storage#hmacKeysMetadata", items = arr(items) })
      elseif op == "insert" then
        local k = { id = "GOOG" .. fresh(), email = q.serviceAccountEmail or SERVICE_ACCOUNT,
                    state = "ACTIVE", etag = etag() }
        hmac_keys[k.id] = k
        return reply(200, { kind = "storage#hmacKey", metadata = hmac_json(k), secret = "c2VjcmV0" })
      end
      local k = hmac_keys[id]
      if not k then return fail(404, "no HMAC key " .. id) end
      if op == "get" then return reply(200, hmac_json(k)) end
      if op == "delete" then
        if k.state ~= "INACTIVE" then return fail(400, "only an INACTIVE key can be deleted") end
        hmac_keys[id] = nil
        return { status = 204 }
      end
      local doc = decode_body(req.body)
      if not doc then return fail(400, "bad JSON") end
      local want = doc.etag or req.headers["if-match"]
      if want and want ~= k.etag then return fail(412, "etag does not match") end
      if doc.state then k.state = doc.state end
      k.etag = etag()
      return reply(200, hmac_json(k))
    end
  end
  if seg[1] == "projects" and seg[3] == "serviceAccount" and n == 3 and m == "GET" then
    return "storage.serviceaccount.get", function()
      return reply(200, { kind = "storage#serviceAccount", email_address = SERVICE_ACCOUNT })
    end
  end
  if seg[1] ~= "b" then return nil end
  if n == 1 then
    if m == "GET" then
      return "storage.buckets.list", function()
        local items = {}
        for _, b in pairs(buckets) do items[#items + 1] = bucket_json(b) end
        table.sort(items, function(a, b) return a.name < b.name end)
        return reply(200, { kind = "storage#buckets", items = arr(items) })
      end
    elseif m == "POST" then
      return "storage.buckets.insert", function()
        local doc = decode_body(req.body)
        if not doc or type(doc.name) ~= "string" then return fail(400, "bucket name required") end
        if buckets[doc.name] then return fail(409, "bucket " .. doc.name .. " exists") end
        return reply(200, bucket_json(new_bucket(doc.name)))
      end
    end
    return nil
  end
  local bname = seg[2]
  if n == 2 then
    local op = ({ GET = "get", PUT = "update", PATCH = "patch", DELETE = "delete" })[m]
    if not op then return nil end
    return "storage.buckets." .. op, function()
      local b, err = find_bucket(bname)
      if not b then return err end
      local pre = check_metageneration(q, b)
      if pre then return pre end
      if op == "get" then return reply(200, bucket_json(b)) end
      if op == "delete" then
        if next(b.objects) then return fail(409, "the bucket is not empty") end
        buckets[bname] = nil
        return { status = 204 }
      end
      local doc = decode_body(req.body)
      if not doc then return fail(400, "bad JSON") end
      if doc.storageClass then b.storage_class = doc.storageClass end
      if doc.retentionPolicy and doc.retentionPolicy.retentionPeriod then
        b.retention = tonumber(doc.retentionPolicy.retentionPeriod)
      end
      b.metageneration = b.metageneration + 1
      return reply(200, bucket_json(b))
    end
  end
  local sub = seg[3]
  if (sub == "acl" or sub == "defaultObjectAcl") and n <= 4 then
    local op = crud(m, seg[4] ~= nil)
    if not op then return nil end
    return ACL_OP[sub] .. "." .. op, function()
      local b, err = find_bucket(bname)
      if not b then return err end
      return acl_op(m, sub == "acl" and b.acl or b.default_acl, seg[4], req.body, ACL_KIND[sub])
    end
  end
  if sub == "iam" then
    if n == 3 and m == "GET" then
      return "storage.buckets.getIamPolicy", function()
        local b, err = find_bucket(bname)
        if not b then return err end
        return reply(200, { kind = "storage#policy", resourceId = "projects/_/buckets/" .. bname,
                            version = b.iam.version, etag = b.iam.etag, bindings = b.iam.bindings })
      end
    elseif n == 3 and m == "PUT" then
      return "storage.buckets.setIamPolicy", function()
        local b, err = find_bucket(bname)
        if not b then return err end
        local doc = decode_body(req.body)
        if not doc then return fail(400, "bad JSON") end
        local want = doc.etag or req.headers["if-match"]
        if want and want ~= b.iam.etag then return fail(412, "etag does not match") end
        b.iam = { version = doc.version or 1, bindings = arr(doc.bindings), etag = etag() }
        return reply(200, { kind = "storage#policy", resourceId = "projects/_/buckets/" .. bname,
                            version = b.iam.version, etag = b.iam.etag, bindings = b.iam.bindings })
      end
    elseif n == 4 and seg[4] == "testPermissions" and m == "GET" then
      return "storage.buckets.testIamPermissions", function()
        local b, err = find_bucket(bname)
        if not b then return err end
        local perms = {}
        for p in (req.query or ""):gmatch("permissions=([^&]+)") do perms[#perms + 1] = unescape(p) end
        return reply(200, { kind = "storage#testIamPermissionsResponse", permissions = arr(perms) })
      end
    end
    return nil
  end
  if sub == "lockRetentionPolicy" and n == 3 and m == "POST" then
    return "storage.buckets.lockRetentionPolicy", function()
      local b, err = find_bucket(bname)
      if not b then return err end
      if not q.ifMetagenerationMatch then return fail(400, "ifMetagenerationMatch required") end
      local pre = check_metageneration(q, b)
      if pre then return pre end
      b.locked = true
      b.retention = b.retention or 60
      b.metageneration = b.metageneration + 1
      return reply(200, bucket_json(b))
    end
  end
  if sub == "notificationConfigs" and n <= 4 then
    local op = crud(m, seg[4] ~= nil)
    if not op or op == "patch" or op == "update" then return nil end
    return "storage.notifications." .. op, function()
      local b, err = find_bucket(bname)
      if not b then return err end
      local function nj(id, nt)
        return { kind = "storage#notification", id = id, topic = nt.topic,
                 payload_format = nt.payload_format }
      end
      if op == "list" then
        local items = {}
        for id, nt in pairs(b.notifications) do items[#items + 1] = nj(id, nt) end
        table.sort(items, function(x, y) return x.id < y.id end)
        return reply(200, { kind = "storage#notifications", items = arr(items) })
      elseif op == "insert" then
        local doc = decode_body(req.body)
        if not doc or not doc.topic then return fail(400, "topic required") end
        local id = tostring(fresh())
        b.notifications[id] = { topic = doc.topic, payload_format = doc.payload_format or "JSON_API_V1" }
        return reply(200, nj(id, b.notifications[id]))
      end
      local nt = b.notifications[seg[4]]
      if not nt then return fail(404, "no notification " .. seg[4]) end
      if op == "get" then return reply(200, nj(seg[4], nt)) end
      b.notifications[seg[4]] = nil
      return { status = 204 }
    end
  end
  if sub ~= "o" then return nil end
  if n == 3 then
    if m == "GET" then
      return "storage.objects.list", function()
        local b, err = find_bucket(bname)
        if not b then return err end
        local items = {}
        for _, o in pairs(b.objects) do items[#items + 1] = object_json(b, o) end
        table.sort(items, function(x, y) return x.name < y.name end)
        return reply(200, { kind = "storage#objects", items = arr(items) })
      end
    elseif m == "POST" or m == "PUT" then
      return "storage.objects.insert", function()
        local b, err = find_bucket(bname)
        if not b then return err end
        if q.upload_id then return upload_chunk(req, q) end
        if m == "PUT" then return fail(400, "upload_id required") end
        return insert_object(req, b, q)
      end
    elseif m == "DELETE" and q.upload_id then
      return "storage.objects.delete", function()
        uploads[q.upload_id] = nil
        return { status = 499 }
      end
    end
    return nil
  end
  local oname = seg[4]
  if n == 4 then
    local op = ({ GET = "get", PUT = "update", PATCH = "patch", DELETE = "delete" })[m]
    if not op then return nil end
    return "storage.objects." .. op, function()
      local b, err = find_bucket(bname)
      if not b then return err end
      local o
      o, err = find_object(b, oname)
      if not o then return err end
      local pre = check_generation(q, o) or check_metageneration(q, o)
      if pre then return pre end
      if op == "get" then
        if q.alt == "media" or prefix == "download" then
          return { status = 200, body = o.data, headers = {
            ["Content-Type"] = "application/octet-stream",
            ["x-goog-generation"] = tostring(o.generation) } }
        end
        return reply(200, object_json(b, o))
      elseif op == "delete" then
        b.objects[oname] = nil
        return { status = 204 }
      end
      local doc = decode_body(req.body)
      if not doc then return fail(400, "bad JSON") end
      if op == "update" then o.metadata = {} end
      for k, v in pairs(doc.metadata or {}) do o.metadata[k] = v end
      o.metageneration = o.metageneration + 1
      return reply(200, object_json(b, o))
    end
  end
  local op = seg[5]
  if op == "acl" and n <= 6 then
    local name = crud(m, seg[6] ~= nil)
    if not name then return nil end
    return "storage.object_acl." .. name, function()
      local b, err = find_bucket(bname)
      if not b then return err end
      local o
      o, err = find_object(b, oname)
      if not o then return err end
      return acl_op(m, o.acl, seg[6], req.body, "storage#objectAccessControl")
    end
  end
  if op == "compose" and n == 5 and m == "POST" then
    return "storage.objects.compose", function()
      local b, err = find_bucket(bname)
      if not b then return err end
      local doc = decode_body(req.body)
      if not doc or type(doc.sourceObjects) ~= "table" then return fail(400, "sourceObjects required") end
      local parts = {}
      for _, s in ipairs(doc.sourceObjects) do
        local src = b.objects[s.name or ""]
        if not src then return fail(404, "source " .. tostring(s.name) .. " not found") end
        parts[#parts + 1] = src.data
      end
      local pre = check_generation(q, b.objects[oname])
      if pre then return pre end
      return reply(200, object_json(b, put_object(b, oname, table.concat(parts))))
    end
  end
  if (op == "copyTo" or op == "rewriteTo") and n == 9 and seg[6] == "b" and seg[8] == "o"
     and m == "POST" then
    return op == "copyTo" and "storage.objects.copy" or "storage.objects.rewrite", function()
      local b, err = find_bucket(bname)
      if not b then return err end
      local o
      o, err = find_object(b, oname)
      if not o then return err end
      local src_q = { ifGenerationMatch = q.ifSourceGenerationMatch }
      local pre = check_generation(src_q, o)
      if pre then return pre end
      return copy_object(b, o, seg[7], seg[9], q, op == "rewriteTo")
    end
  end
  return nil
end

-- The XML API: GET, PUT and POST of /BUCKET/OBJECT.
local function xml_route(req, seg, q)
  if #seg < 2 then return nil end
  local bname, oname = seg[1], table.concat(seg, "/", 2)
  local m = req.method
  if m == "GET" then
    return "storage.objects.get", function()
      local b, err = find_bucket(bname)
      if not b then return err end
      local o
      o, err = find_object(b, oname)
      if not o then return err end
      return { status = 200, body = o.data, headers = {
        ["Content-Type"] = "application/octet-stream",
        ["x-goog-generation"] = tostring(o.generation) } }
    end
  elseif m == "PUT" or m == "POST" then
    return "storage.objects.insert", function()
      local b, err = find_bucket(bname)
      if not b then return err end
      if q.upload_id then return upload_chunk(req, q) end
      local cond = { ifGenerationMatch = req.headers["x-goog-if-generation-match"] }
      if m == "POST" then  -- a resumable session (x-goog-resumable: start)
        local id = string.format("%x", fresh() * 40503)
        uploads[id] = { bucket = bname, name = oname, query = cond, media = {}, size = 0 }
        local host = req.headers.host or "127.0.0.1"
        local uri = "http://" .. host .. "/" .. bname .. "/" .. oname .. "?upload_id=" .. id
        return { status = 201, headers = { Location = uri }, body = enc({ location = uri }) .. "\n" }
      end
      local ins, t = peek(req, "storage.objects.insert")
      local code, kib = (ins or ""):match("^return%-(%d+)%-after%-(%d+)K$")
      if code and #req.body >= tonumber(kib) * 1024 then
        dequeue(t, "storage.objects.insert")
        return fail(tonumber(code), "Fault injected during a single-shot upload")
      end
      local pre = check_generation(cond, b.objects[oname])
      if pre then return pre end
      local o = put_object(b, oname, req.body)
      return { status = 200, headers = { ETag = '"' .. o.generation .. '"',
                                         ["x-goog-generation"] = tostring(o.generation) } }
    end
  end
  return nil
end

-- ------------------------------------------------------------------ set-up

local function fixtures(body)
  local doc = decode_body(body)
  if not doc or type(doc.sets) ~= "table" then return fail(400, "expected {\"sets\": [...]}") end
  local out = {}
  for i, set in ipairs(doc.sets) do
    local b = new_bucket(string.format("bucket-%d-%d", fresh(), i))
    local r = { bucket = b.name, bucket_metageneration = b.metageneration,
                iam_etag = b.iam.etag, acl_entity = "project-owners-" .. PROJECT }
    if not set.empty then
      local o = put_object(b, "o", set.size and pattern(set.size) or "hello world")
      r.object, r.generation, r.metageneration = o.name, o.generation, o.metageneration
      r.size, r.digest = #o.data, digest(o.data)
      put_object(b, "part", "!")
    end
    local k = { id = "GOOG" .. fresh(), email = SERVICE_ACCOUNT,
                state = set.hmac_state or "ACTIVE", etag = etag() }
    hmac_keys[k.id] = k
    r.hmac, r.hmac_etag = k.id, k.etag
    local nid = tostring(fresh())
    b.notifications[nid] = { topic = "projects/" .. PROJECT .. "/topics/my-topic-name",
                             payload_format = "JSON_API_V1" }
    r.notification = nid
    out[i] = r
  end
  return reply(200, { sets = out })
end

-- ------------------------------------------------------------------ dispatch

local function segments(path)
  local t = {}
  for s in path:gmatch("[^/]+") do t[#t + 1] = unescape(s) end
  return t
end

-- The answer to a request after its instruction, if any, is applied.
local function with_instruction(req, method, handler)
  local ins, t = peek(req, method)
  if ins then
    local code = ins:match("^return%-(%d+)$")
    if code then
      dequeue(t, method)
      return fail(tonumber(code), "Retry Test: Caused a " .. code)
    end
    if ins == "return-reset-connection" then
      dequeue(t, method)
      return { reset = true }
    end
    local limit = ins == "return-broken-stream" and 4 or nil
    local kib = ins:match("^return%-broken%-stream%-after%-(%d+)K$")
    if kib and method == "storage.objects.get" then limit = tonumber(kib) * 1024 end
    if limit then
      local answer = handler()
      if type(answer) == "table" and answer.body and #answer.body > limit then
        dequeue(t, method)
        answer.truncate = limit
      end
      return answer
    end
  end
  return handler()
end

function respond(req)
  local path, m = req.path, req.method
  if path == "/" then return { status = 200, body = "OK" } end
  if path == "/retry_test" and m == "POST" then return create_test(req.body) end
  if path == "/retry_tests" and m == "GET" then
    local list = {}
    for _, id in ipairs(test_order) do
      if tests[id] then list[#list + 1] = test_json(tests[id]) end
    end
    return reply(200, { retry_test = arr(list) })
  end
  local tid = path:match("^/retry_test/([%w]+)$")
  if tid then
    local t = tests[tid]
    if not t then return fail(404, "Retry Test " .. tid .. " not found") end
    if m == "GET" then return reply(200, test_json(t)) end
    if m == "DELETE" then
      tests[tid] = nil
      return { status = 200, body = "Deleted " .. tid }
    end
    return fail(405, "method not allowed")
  end
  if path == "/_conformance/fixtures" and m == "POST" then return fixtures(req.body) end
  local cb, co = path:match("^/_conformance/object/([^/]+)/(.+)$")
  if cb then
    local b = buckets[cb]
    local o = b and b.objects[unescape(co)]
    if not o then return fail(404, "no such object") end
    return reply(200, { size = #o.data, digest = digest(o.data), generation = o.generation })
  end
  local q = parse_query(req.query)
  local prefix, rest = path:match("^/(storage)/v1(/.*)$")
  if not prefix then prefix, rest = path:match("^/(upload)/storage/v1(/.*)$") end
  if not prefix then prefix, rest = path:match("^/(download)/storage/v1(/.*)$") end
  local method, handler
  if prefix then method, handler = json_route(req, segments(rest), q, prefix)
  else method, handler = xml_route(req, segments(path), q) end
  if not method then return fail(404, "no such operation: " .. m .. " " .. path) end
  return with_instruction(req, method, handler)
end
