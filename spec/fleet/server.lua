-- spec/fleet/server.lua: the fault server behind spec/fleet_spec.lua and
-- the fleet bench: a service that is down (503) or up (200).
respond = routes{
  ["/503"] = {status = 503, body = "busy\n"},
  ["/200"] = {status = 200, body = "ok\n"},
}
