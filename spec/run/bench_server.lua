-- spec/run/bench_server.lua: the fault server behind spec/bench/run_vs_curl.sh.
-- /ok answers 200 with a small body; /flaky/N answers 503, 503, then 200
-- (each N its own count, so every run sees the same sequence).
respond = function (req)
  if req.path:sub(1, 7) == "/flaky/" then
    if req.count <= 2 then return {status = 503, body = "busy\n"} end
  end
  return {status = 200, body = "hello from the bench server\n"}
end
