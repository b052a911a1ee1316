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

-- What is wrong with a policy as getIamPolicy answered it, or nil: an
-- object whose bindings, when present, are a list of {role = "...",
-- members = {"...", ...}}.  A malformed answer is a server's fault, like
-- one that is not JSON: a 502, retried, never a script error.
local function malformed(policy)
  if type(policy) ~= "table" or policy[1] ~= nil then return "not a JSON object" end
  local bindings = policy.bindings
  if bindings == nil then return nil end
  if type(bindings) ~= "table" then return "bindings is not a list" end
  local n = 0
  for _ in pairs(bindings) do n = n + 1 end
  if n ~= #bindings then return "bindings is not a list" end
  for i, binding in ipairs(bindings) do
    if type(binding) ~= "table" or type(binding.role) ~= "string" then
      return ("binding %d has no role"):format(i)
    end
    local members = binding.members
    if type(members) ~= "table" then return ("binding %d has no members"):format(i) end
    for j = 1, #members do
      if type(members[j]) ~= "string" then return ("binding %d: member %d is not a string"):format(i, j) end
    end
  end
  return nil
end

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
  local wrong = malformed(policy)
  if wrong then return 502, "getIamPolicy: " .. wrong .. "\n" end
  add_member(policy, role, member)      -- the etag read above travels along
  local put = http.post(resource .. ":setIamPolicy", json.encode { policy = policy }, JSON)
  return put.status, put.body
end
