-- policies/examples/idempotency-key.lua: retry a POST without doing it twice.
--
--   luaretry run policies/examples/idempotency-key.lua -X POST -d @order.json URL
--
-- Services such as payment APIs apply a POST once per Idempotency-Key: a
-- retry carrying the same key gets the first answer instead of a second
-- charge.  prepare() makes the key at a call's first attempt and keeps it in
-- info.call, the table that lasts as long as the call, so every retry of
-- that call sends the same key and the next call gets a new one.  (A global
-- would not do: globals are shared by every call the policy serves.)  With
-- the key in place, is_idempotent lets the engine retry the POST.  A key the
-- caller set (-H 'Idempotency-Key: ...') is kept.
--
-- Backoff, limits and is_transient are http.lua's.

require "http"
name = "idempotency-key"

-- The caller's key header, when it holds a key: an empty or blank value is
-- none (it is replaced, and does not make the POST repeatable).
local function key_header(headers)
  for header, value in pairs(headers) do
    if header:lower() == "idempotency-key" then
      return type(value) == "string" and value:find("%S") and header or nil, header
    end
  end
end

-- 128 random bits from the call's own generator (seeded per call; --seed
-- makes them repeatable).
local function new_key()
  local words = {}
  for i = 1, 4 do words[i] = string.format("%08x", math.random(0, 0xffffffff)) end
  return table.concat(words)
end

function prepare(request, attempt, info)
  local keyed, blank = key_header(request.headers)
  if request.method ~= "POST" or keyed then return end
  info.call.idempotency_key = info.call.idempotency_key or new_key()
  request.headers[blank or "Idempotency-Key"] = info.call.idempotency_key
end

local REPEATABLE = { GET = true, HEAD = true, PUT = true, DELETE = true,
                     OPTIONS = true, TRACE = true }

function is_idempotent(request)
  if request.method == "POST" then return key_header(request.headers) ~= nil end
  return REPEATABLE[request.method] == true
end
