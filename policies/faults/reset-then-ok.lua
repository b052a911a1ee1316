-- The first request on each path has its connection reset (the client sees
-- "connection reset by peer"); later ones succeed.
respond = sequence{{reset = true}, {body = "ok\n"}}
