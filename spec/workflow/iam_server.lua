-- spec/workflow/iam_server.lua: an IAM-like policy store for the workflow
-- spec.  POST .../:getIamPolicy answers the policy with its etag;
-- POST .../:setIamPolicy applies {"policy": {...}} only when its etag is
-- current, else 409 ABORTED, as Google Cloud IAM does.  Once, between our
-- first read and our first write, a concurrent writer adds its own binding.
local json = require "dkjson"

local policy = { version = 1, etag = "etag-1", bindings = {} }
local generation = 1
local concurrent_writer_pending = true

local function bump()
  generation = generation + 1
  policy.etag = "etag-" .. generation
end

local function add_member(p, role, member)
  for _, b in ipairs(p.bindings) do
    if b.role == role then
      for _, m in ipairs(b.members) do if m == member then return end end
      b.members[#b.members + 1] = member
      return
    end
  end
  p.bindings[#p.bindings + 1] = { role = role, members = { member } }
end

local function reply(status, t)
  return { status = status, headers = { ["Content-Type"] = "application/json" },
           body = json.encode(t) }
end

function respond(req)
  if req.path:match(":getIamPolicy$") then return reply(200, policy) end
  if not req.path:match(":setIamPolicy$") then return { status = 404, body = "no such method\n" } end
  if concurrent_writer_pending then
    concurrent_writer_pending = false
    add_member(policy, "roles/editor", "user:concurrent-writer@example.com")
    bump()
  end
  local body = json.decode(req.body or "")
  local new = body and body.policy
  if type(new) ~= "table" or type(new.bindings) ~= "table" then
    return reply(400, { error = { code = 400, status = "INVALID_ARGUMENT", message = "policy expected" } })
  end
  if new.etag ~= policy.etag then
    return reply(409, { error = { code = 409, status = "ABORTED",
                                  message = "There were concurrent policy changes." } })
  end
  policy = new
  bump()
  return reply(200, policy)
end
