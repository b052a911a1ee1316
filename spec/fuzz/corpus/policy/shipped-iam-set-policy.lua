-- policies/examples/iam-set-policy.lua: grant ROLE to MEMBER on an IAM
-- resource, as a read-modify-write retried as a whole.
--
--   luaretry run policies/examples/iam-set-policy.lua RESOURCE_URL ROLE MEMBER
--   e.g. .../v1/projects/my-project roles/viewer user:alice@example.com
--
-- IAM answers setIamPolicy with 409 ABORTED when the policy changed since
-- our getIamPolicy (its etag no longer matches): only a fresh read, the same
-- change and a new write can succeed ("Google Cloud IAM: retry failed
-- requests").  iam.lua treats that 409 as transient inside a workflow, so
-- the engine re-runs this whole function after the backoff.  Adding a member
-- that is already there changes nothing: re-running is safe.

require "iam"
name = "iam-set-policy"

local JSON = { ["Content-Type"] = "application/json" }

local function add_member(policy, role, member)
  policy.bindings = policy.bindings or {}
  for _, binding in ipairs(policy.bindings) do
    if binding.role == role then
      for _, m in ipairs(binding.members) do
        if m == member then return end
      end
      table.insert(binding.members, member)
      return
    end
  end
  table.insert(policy.bindings, { role = role, members = { member } })
end

function run(http, args)
  local resource, role, member = args[1], args[2], args[3]
  if not (resource and role and member) then
    error("usage: luaretry run iam-set-policy.lua RESOURCE_URL ROLE MEMBER", 0)
  end
  local got = http.post(resource .. ":getIamPolicy", "{}", JSON)
  if got.status ~= 200 then return got.status, got.body end
  local policy = json.decode(got.body)
  if type(policy) ~= "table" then return 502, "getIamPolicy: not a JSON object\n" end
  add_member(policy, role, member)      -- the etag read above travels along
  local put = http.post(resource .. ":setIamPolicy", json.encode { policy = policy }, JSON)
  return put.status, put.body
end
