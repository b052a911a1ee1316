-- The first request on each path never gets an answer, so only an attempt
-- timeout gets the client out; the retry is answered at once.
respond = sequence{{hang = true}, {body = "ok\n"}}
