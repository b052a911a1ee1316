-- Slow on purpose: every 3rd request of /every waits 0.5 s, a quarter of
-- /fraction's (seeded, the same ones on every run), none of /fast's.
respond = routes{
  ["/every"] = latency{"e", slow = 0.5, every = 3},
  ["/fraction"] = latency{{status = 201, body = "f"}, base = 0, slow = 0.5, fraction = 0.25, seed = 7},
  ["/base"] = latency{function (req) return "b" .. req.count end, base = 0.2},
}
