max_attempts = 5
deadline = 30
function is_transient(status, body, info)
  local ra = info.headers["x-ratelimit-reset"]
  if ra then return tonumber(ra) end
  if status == 0 then return info.error ~= "tls_verify" end
  return status >= 500
end
