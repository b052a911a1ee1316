-- spec/batch/server.lua: the fault server behind spec/batch_spec.lua
-- (req.count is per path; the spec resets the server between tests).
--   /flaky/NAME    503, 503, then 200 with the body "body of /flaky/NAME\n"
--   /always503/N   503 every time
--   /notfound/N    404
--   /slow/N        200 after 0.5 s
--   /hang/N        never answers
--   /ok/N          200 at once
local function prefix(path, p) return path:sub(1, #p) == p end

respond = function (req)
  local path = req.path
  if prefix(path, "/flaky/") then
    if req.count <= 2 then return {status = 503, body = "busy " .. req.count .. "\n"} end
    return {status = 200, body = "body of " .. path .. "\n"}
  elseif prefix(path, "/always503") then
    return {status = 503, body = "busy\n"}
  elseif prefix(path, "/notfound") then
    return {status = 404, body = "no such thing\n"}
  elseif prefix(path, "/slow/") then
    return {status = 200, delay = 0.5, body = "slow " .. path .. "\n"}
  elseif prefix(path, "/hang") then
    return {hang = true}
  end
  return {status = 200, body = "ok " .. path .. "\n"}
end
