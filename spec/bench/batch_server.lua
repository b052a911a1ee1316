-- spec/bench/batch_server.lua: the fault server behind spec/bench/batch.sh.
--   /outage/N   503 every time (an outage)
--   /t/N        503 on 30% of attempts, deterministic per path: attempt k
--               (req.count) of a path gets 503 when a hash of (path, k) says
--               so, k <= 3 only (at most three 503s in a row, so no URL
--               needs more than 4 attempts); 200 with a small body otherwise.
--               2,000 paths /t/1../t/2000 take 2,813 requests, 809 of them 503.
local function mix(h)
  h = (h ~ (h >> 30)) * 0xbf58476d1ce4e5b9
  h = (h ~ (h >> 27)) * 0x94d049bb133111eb
  return h ~ (h >> 31)
end

local function fnv(s)
  local h = 0xcbf29ce484222325
  for i = 1, #s do h = (h ~ s:byte(i)) * 0x100000001b3 end
  return h
end

respond = function (req)
  local path = req.path
  if path:sub(1, 8) == "/outage/" then return {status = 503, body = "down\n"} end
  if path:sub(1, 3) == "/t/" and req.count <= 3 and
     (mix(fnv(path) + req.count) >> 1) % 100 < 30 then
    return {status = 503, body = "busy\n"}
  end
  return {status = 200, body = "hello from " .. path .. "\n"}
end
