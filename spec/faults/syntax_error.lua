-- A script that does not compile (line 3), for the error-message test.
respond = function (req)
  return {status = 200 body = "missing comma"}
end
