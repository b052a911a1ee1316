-- run() that fails: an error on line 5, or a wrong return
max_attempts = 2
options = { mode = "error" }
function run(http, args)
  if options.mode == "error" then error("no such thing") end
  return "200", 42
end
