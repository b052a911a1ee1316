-- callbacks: a gsub replacement function that loops
-- drive: classify; expect: time limit reached
max_attempts = 3
function is_transient(status, body)
  if status ~= 503 then return false end
  return (body .. "abc"):gsub("%a", function(c) while true do end end) -- HERE
end
