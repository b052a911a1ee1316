-- The fault server for spec/load_spec.lua:
--   /throttle  429 twice, then 200       /busy  503 twice, then 200
--   /hdr       503 twice, then 200 (the attempt headers are read from the log)
--   /ok        200                    /down  503, always
--   /sixty     503, 503, 200, 503, 200, over and over: 60% fail, never 3 in a row
respond = routes{
  ["/throttle"] = sequence{429, 429, {body = "ok\n"}},
  ["/busy"] = sequence{503, 503, {body = "ok\n"}},
  ["/hdr"] = sequence{503, 503, {body = "ok\n"}},
  ["/ok"] = {body = "ok\n"},
  ["/down"] = {status = 503},
  ["/sixty"] = cycle{503, 503, 200, 503, 200},
}
