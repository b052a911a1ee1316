-- fields: backoff = { initial = 0 }
-- drive: load; expect: could retry forever; where: field_retry_forever.lua
backoff = { initial = 0 } -- HERE
