-- Two 503s, then 200 for good: a retry policy with three attempts or more
-- gets through.
respond = sequence{
  {status = 503, body = "unavailable\n"},
  {status = 503, body = "unavailable\n"},
  {status = 200, body = "ok\n"},
}
