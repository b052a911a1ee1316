max_attempts = 3
deadline = 20
function is_transient(status, body, info)
  return status == 409 and info.workflow and body:find("ABORTED", 1, true) ~= nil
end
function run(http, args)
  local r = http.get(args[1] .. "/getIamPolicy", { Accept = "application/json" })
  local p = json.decode(r.body)
  p.bindings = p.bindings or {}
  table.insert(p.bindings, { role = "roles/viewer", members = { args[2] } })
  local w = http.request{ method = "POST", url = args[1] .. "/setIamPolicy", body = json.encode(p) }
  return w.status, w.body
end
