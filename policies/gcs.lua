-- policies/gcs.lua: Google Cloud Storage.
--
-- Sources, by page title:
--   [RS] Cloud Storage, "Retry strategy": which answers are worth a retry
--        and which operations are idempotent, always or on a condition;
--   [TB] Cloud Storage, "Truncated exponential backoff": the wait formula;
--   [RP] Cloud Storage, "Request preconditions": how the JSON and the XML API
--        spell a precondition;
--   [RU] Cloud Storage, "Resumable uploads": a session URI and its PUTs;
--   [CT] the Cloud Storage retry conformance tests (googleapis/conformance-
--        tests, storage/v1/retry_tests.json), which every Google client
--        library runs: spec/conformance_spec.lua runs them against this file.
--
-- Which answers are retried [RS]: "HTTP 408, 429, and 5xx response codes"
-- and "socket timeouts and TCP disconnects": status 0 with every transport
-- failure (connect, timeout, reset, dns, tls, truncated, ...) except
-- those no retry heals (retry.final_error): tls_verify, a certificate or
-- host name that does not verify, which retrying only hides; a redirect
-- loop or refused redirect, a body above --max-filesize (too_large) and
-- a body that twice did not match --checksum (checksum_mismatch).  Everything else (400, 401,
-- 403, 404, 409, 412, ...) is final.
--   Sources differ: [TB] says "5xx and 429"; [RS] is more precise and adds
--   408 (and the conformance tests retry a 408 during uploads): we follow
--   [RS].  The Python client retries only 500, 502, 503 and 504 of the 5xx;
--   [RS] says every 5xx, and so do we (a 501 or 507 is retried too).
--
-- Waits [TB]: min(2^n + random_number_milliseconds, maximum_backoff) before
-- retry n (n from 0), the random part up to 1000 ms and drawn anew for every
-- retry: jitter "additive", jitter_max = 1, cap_jitter = true;
-- maximum_backoff "typically 32 or 64 seconds": 32 here, `--set
-- backoff.max=64` for 64; "continue waiting and retrying up to some maximum
-- number of retries, but do not increase the wait period": 10 attempts in
-- all, five retries on the way up (1, 2, 4, 8, 16 s, each + up to 1 s), then
-- four at the cap (32 s each): 159 s of waiting without jitter, at most
-- 164 s with it.  Taken to the letter, the formula puts the jitter under the
-- cap: once capped, every client waits exactly 32 s and clients that failed
-- together retry together.  `--set backoff.cap_jitter=false` keeps them
-- spread.
--
-- Time (no page gives one; the client libraries' defaults range from 50 s
-- in Java and 120 s in Python to 600 s in Node.js and 15 min in C++): 120 s
-- for one attempt and 600 s for the whole call.  600 s holds the whole
-- 164 s schedule with room for slow attempts; 120 s lets an upload or
-- download of a few hundred MiB finish on a slow link while a server that
-- accepts and never answers costs two minutes, not the call.  For larger
-- transfers raise both: `--set attempt_timeout=... --set deadline=...`
-- (or curl's `--max-time` and `--retry-max-time`).
--
-- Idempotency [RS], decided by is_idempotent below from the method, the
-- path and the precondition the request carries:
--   always   every GET, HEAD and OPTIONS (gets and lists); bucket insert and
--            delete; lockRetentionPolicy; testIamPermissions; HMAC key and
--            notification delete; a PUT (or POST, or DELETE) to a resumable
--            upload session URI, the `upload_id` query parameter [RU] (GCS
--            ignores bytes it already has, so resending the whole body is
--            safe), and the XML API's multipart-upload parts (`uploadId`).
--   on a condition
--            object insert (uploads of every kind, their session initiation
--            included), compose, copy, rewrite and delete: a generation
--            precondition: `ifGenerationMatch`, or `generation` (python-
--            storage's reading, which [CT] was written against; for delete
--            [RS] names a generation number too);
--            bucket and object patch and update: `ifMetagenerationMatch`, or
--            an ETag as `If-Match`;
--            bucket setIamPolicy and HMAC key update: an `etag` in the JSON
--            body (top level), or an ETag as `If-Match`.
--            [RP]: the JSON API takes the query parameters, the XML API the
--            headers `x-goog-if-generation-match` and
--            `x-goog-if-metageneration-match`.  For an XML or unrecognised
--            path we also take the query spelling (an emulator or proxy in
--            front of the JSON API may be addressed that way); on a JSON API
--            path only the JSON spelling counts, since the server ignores the
--            other.
--   never    bucket, object and default object ACL changes (insert, patch,
--            update, delete), HMAC key create, notification create.
-- A write to a path that is none of these (not a JSON API path and not an
-- XML bucket or object path) is repeated only with a precondition, in either
-- spelling; other methods are not repeated.
--   Sources differ: since January 2025 python-storage retries object
--   deletes, inserts and patches without a precondition (its copy of [CT]
--   moved them to "always idempotent"); [RS] and the canonical [CT] still
--   make them conditional, and a repeated unconditional delete can remove a
--   newer generation, a repeated unconditional upload can push an old
--   version out of a bucket that keeps N: we follow [RS] and [CT].
-- A request that never left the machine (no connection) is always retried
-- (the engine's rule); a transient answer to a request that is not
-- idempotent and may have taken effect is final (rule "idempotency").
--
-- The body: only setIamPolicy and HMAC key update bodies are read (for their
-- etag), and only when the script was handed all of it (request.body_len,
-- when the engine gives it, not above #request.body): an upload of any size
-- is judged from its method, URL and headers.

name = "gcs"
max_attempts = 10
deadline = 600
attempt_timeout = 120
local google = require "google"
local retry = require "retry"
backoff = google.backoff(32)  -- [TB], the formula shared with iam.lua and memorystore.lua

function is_transient(status, _, info) -- the body is not read: none is copied
  if status == 0 then return not retry.final_error(info.error) end  -- timeouts and disconnects [RS]
  if status == 429 then return google.too_many_requests(info) end  -- a rate-limit reset counts
  return status == 408 or (status >= 500 and status <= 599)
end

-- ---------------------------------------------------------------- requests

local SAFE = { GET = true, HEAD = true, OPTIONS = true }
local WRITES = { POST = true, PUT = true, PATCH = true, DELETE = true }

-- host, path and query table of a URL as curl takes it (the scheme may be
-- missing); the fragment is dropped, a key without "=" has the value "".
local function parse_url(url)
  url = url:gsub("#.*$", "")
  local rest = url:match("^%a[%w+.-]*://(.*)$") or url
  local authority, target = rest:match("^([^/?]*)(.*)$")
  local host = authority:gsub("^.*@", ""):gsub(":%d*$", ""):lower()
  local path, query = target:match("^([^?]*)%??(.*)$")
  if path == "" then path = "/" end
  local q = {}
  for pair in query:gmatch("[^&]+") do
    local k, v = pair:match("^([^=]*)=(.*)$")
    if not k then k, v = pair, "" end
    if q[k] == nil then q[k] = v end
  end
  return host, path, q
end

local function segments(path)
  local t = {}
  for s in path:gmatch("[^/]+") do t[#t + 1] = s end
  return t
end

-- The value of a header, whatever case the caller gave its name in.
local function header(headers, name)
  if type(headers) ~= "table" then return nil end
  for k, v in pairs(headers) do
    if type(k) == "string" and k:lower() == name and type(v) == "string" then return v end
  end
  return nil
end

local function present(v) return type(v) == "string" and v:find("%S") ~= nil end

-- The JSON API's conditions [RP], from the query (and If-Match for ETags).
local function json_condition(cond, q, r)
  if cond == "generation" then
    return present(q.ifGenerationMatch) or present(q.generation)
  elseif cond == "metageneration" then
    return present(q.ifMetagenerationMatch) or present(header(r.headers, "if-match"))
  elseif cond == "etag" then
    if present(header(r.headers, "if-match")) then return true end
    local body = r.body
    if type(body) ~= "string" or not body:find('"etag"', 1, true) then return false end
    if r.body_len and r.body_len > #body then return false end  -- only a prefix: cannot tell
    if type(json) ~= "table" then return false end
    local ok, doc = pcall(json.decode, body)
    return ok and type(doc) == "table" and present(doc.etag)
  end
  return false
end

-- The XML API's conditions [RP] (headers), with the query spelling taken too.
local function xml_condition(cond, q, r)
  if cond == "generation" then
    return present(header(r.headers, "x-goog-if-generation-match"))
        or present(q.ifGenerationMatch) or present(q.generation)
  elseif cond == "metageneration" then
    return present(header(r.headers, "x-goog-if-metageneration-match"))
        or present(q.ifMetagenerationMatch)
  end
  return false
end

-- Any precondition at all, in either spelling: for paths we do not know.
local function any_condition(q, r)
  return xml_condition("generation", q, r) or xml_condition("metageneration", q, r)
end

-- The rule [RS] gives a JSON API operation: "always", "never", a condition
-- ("generation", "metageneration", "etag"), or nil for an unknown one.
-- seg: the path after /storage/v1, /upload/storage/v1 or /download/storage/v1.
local function json_rule(m, seg)
  local n = #seg
  if seg[1] == "b" then
    if n == 1 then return m == "POST" and "always" or nil end         -- buckets.insert
    if n == 2 then                                                    -- one bucket
      if m == "DELETE" then return "always" end
      if m == "PATCH" or m == "PUT" then return "metageneration" end
      return nil
    end
    local sub = seg[3]
    if sub == "acl" or sub == "defaultObjectAcl" then return "never" end
    if sub == "iam" then return (n == 3 and m == "PUT") and "etag" or nil end
    if sub == "lockRetentionPolicy" then return "always" end
    if sub == "notificationConfigs" then
      return (n == 4 and m == "DELETE") and "always" or "never"
    end
    if sub == "o" then
      if n == 3 then return m == "POST" and "generation" or nil end     -- objects.insert
      if n == 4 then                                                  -- one object
        if m == "DELETE" then return "generation" end
        if m == "PATCH" or m == "PUT" then return "metageneration" end
        return nil
      end
      local op = seg[5]
      if op == "acl" then return "never" end
      if m == "POST" and (op == "compose" or op == "copyTo" or op == "rewriteTo") then
        return "generation"
      end
      return nil
    end
    return nil
  end
  if seg[1] == "projects" and seg[3] == "hmacKeys" then
    if n == 3 then return "never" end                                 -- hmacKey.create
    if n == 4 and m == "DELETE" then return "always" end
    if n == 4 and m == "PUT" then return "etag" end
    return nil
  end
  return nil
end

-- The rule for an XML API path: bucket and object from the host (virtual-
-- hosted style, BUCKET.storage.googleapis.com) or from the path.
local function xml_rule(m, host, seg, q)
  if q.acl or q.defaultObjectAcl then return "never" end
  local object
  if host:find("%.storage%.googleapis%.com$") then object = #seg > 0
  else object = #seg > 1 end
  if #seg == 0 then return nil end                                    -- the service
  if not object then                                                  -- a bucket
    if m == "DELETE" then return "always" end
    if m == "PUT" then                                                -- create, or ?cors etc.
      for k in pairs(q) do
        if k ~= "userProject" then return "metageneration" end
      end
      return "always"
    end
    return nil                                                        -- POST: a form upload
  end
  return "generation"                                                 -- upload, copy, compose, delete
end

function is_idempotent(request)
  local m = (request.method or "GET"):upper()
  if m == "POST" then
    local override = header(request.headers, "x-http-method-override")
    if override then m = override:upper() end
  end
  if SAFE[m] then return true end
  if not WRITES[m] then return false end
  local host, path, q = parse_url(type(request.url) == "string" and request.url or "")
  if present(q.upload_id) or present(q.uploadId) then return true end  -- [RU]
  local rule, json_api
  local api_path = path:match("^/storage/v1(/.*)$") or path:match("^/upload/storage/v1(/.*)$")
                   or path:match("^/download/storage/v1(/.*)$")
  if api_path then
    json_api = true
    rule = json_rule(m, segments(api_path))
  elseif path:find("^/batch/") then
    return false                                                      -- many operations in one
  else
    rule = xml_rule(m, host, segments(path), q)
  end
  if rule == "always" then return true end
  if rule == "never" then return false end
  if rule == nil then return any_condition(q, request) end
  if json_api then return json_condition(rule, q, request) end
  return xml_condition(rule, q, request)
end

-- Throttling: the engine's rule classes a 429 as throttling (its own budget
-- cost); Google's backoff page gives one formula for 429 and 5xx alike, so
-- the throttling backoff is the one above.
throttle_backoff = { initial = 1, multiplier = 2, max = 32, jitter = "additive", jitter_max = 1,
                     cap_jitter = true }

-- Guards, shared by every call of this policy in a process (a fleet's with
-- --redis), tuned so that a lone call makes all its attempts while a batch
-- or a busy host cannot multiply an outage or hammer a limiter:
-- the retry budget (gRPC's 10 tokens, 0.1 back per success, retries while
-- more than half are left) with Finagle's floor of 0.1 retries a second (50 s
-- of them held at once: 5, enough for a lone call's last retries); and a
-- rate that starts unlimited and paces only once throttling answers (429)
-- come (AIMD).  A throttling answer costs the budget what a success gives
-- back (0.1, not AWS's 0.357): the rate's pacing answers it, and a limiter's
-- 429s must not spend the retries kept for an outage.  Off: --set
-- budget=none, --set rate=none.
budget = { max_tokens = 10, token_ratio = 0.1, reserve = 0.1,
           throttle_cost = 0.1 }
rate = { adaptive = true }

-- Attempt headers, as Google's storage clients send them: x-goog-api-client
-- carries `gccl-invocation-id/ID gccl-attempt-count/N` (after any tokens the
-- caller's own header had) and x-goog-gcs-idempotency-token the call's
-- invocation id, the same on every attempt of the call (info.invocation_id).
local function header_named(headers, lower)
  for name, value in pairs(headers) do
    if name:lower() == lower then return name, value end
  end
end

function prepare(request, attempt, info)
  local id = info.invocation_id
  if not id then return end  -- a prepare outside a call
  local h = request.headers
  local name, value = header_named(h, "x-goog-api-client")
  value = (value or ""):gsub("%s*gccl%-invocation%-id/%S*", ""):gsub("%s*gccl%-attempt%-count/%S*", "")
  value = value:gsub("^%s+", "")
  h[name or "x-goog-api-client"] = (value ~= "" and value .. " " or "") ..
    "gccl-invocation-id/" .. id .. " gccl-attempt-count/" .. attempt
  if not header_named(h, "x-goog-gcs-idempotency-token") then
    h["x-goog-gcs-idempotency-token"] = id
  end
end
