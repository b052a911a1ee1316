-- Raw answers and streams (spec/faults_spec.lua), and a script that loops.
respond = routes{
  ["/raw"] = {raw = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nraw body"},
  ["/slow"] = {status = 200, stream = {data = "ab", count = 5, interval = 0.1}},
  ["/endless"] = {raw = "HTTP/1.1 200 OK\r\n\r\n", stream = {data = string.rep("e", 65536)}},
  ["/loop"] = function () while true do end end,
}
