-- callbacks: json.decode of arrays nested 100000 deep
-- drive: classify; expect: stack overflow|memory limit reached|time limit reached; where: dkjson.lua:
max_attempts = 3
function is_transient(status)
  if status ~= 503 then return false end
  return json.decode(("["):rep(100000) .. ("]"):rep(100000)) ~= nil
end
