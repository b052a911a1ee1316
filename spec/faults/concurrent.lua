-- Every request waits half a second: a test of many open connections.
respond = {delay = 0.5, body = "ok"}
