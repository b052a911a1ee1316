-- spec/run/quote_body.lua: a policy that quotes the server's body in what
-- it says: print() and its error.
max_attempts = 2
deadline = 20
function is_transient(status, body, info)
  print("the server said: " .. body)
  error("the server said: " .. body)
end
