-- spec/support/downloads.lua: what the download specs share
-- (spec/downloads_spec.lua, spec/resume_trust_spec.lua): the bytes of the
-- fault server's `file` answers, the partial download a run leaves beside
-- FILE, and what the server saw.  Every wait is bounded.
--
--   local dl = require "support.downloads"
--   dl.content(20000), dl.partial(out), dl.plant(out, bytes, url, '"w"')
--   dl.ranges(srv, "/whole")[1].range, dl.file_bytes(srv), dl.grown(tmp, "x.bin", 20)
local proc = require "support.proc"

local M = {}

-- curl for the server's own answers: never under a preloaded sanitizer
M.CURL = "env -u LD_PRELOAD curl -s --max-time 10 "

-- What the server's `file` answer holds: byte i is (i + 17 * seed) % 251.
function M.content(size, seed)
  local t = {}
  for i = 0, size - 1 do t[#t + 1] = string.char((i + 17 * (seed or 0)) % 251) end
  return table.concat(t)
end

-- The partial download of FILE out, kept beside it by a run that was cut,
-- and its sidecar's text (partial(out) .. ".url").
function M.partial(out)
  local dir, base = out:match("^(.*)/([^/]*)$")
  return dir .. "/." .. base .. ".luaretry-partial"
end
function M.sidecar(url, validator)
  return "luaretry-partial 1\n" .. url .. "\n" .. validator .. "\n"
end

-- An earlier run's partial as luaretry leaves it: the bytes, and the
-- sidecar naming url and the validator they are of, both mode 0600.
function M.plant(out, bytes, url, validator)
  local p = M.partial(out)
  proc.writefile(p, bytes)
  proc.writefile(p .. ".url", M.sidecar(url, validator))
  assert(proc.sh("chmod 600 " .. proc.q(p) .. " " .. proc.q(p .. ".url")) == 0)
end

-- The Range and If-Range of each request the server saw on path, in order
-- (false: none).
function M.ranges(srv, path)
  local t = {}
  for _, r in ipairs(srv:requests_on(path)) do
    t[#t + 1] = { range = r.headers.range or false, if_range = r.headers["if-range"] or false }
  end
  return t
end

-- The body bytes of `file` answers the server sent since its last reset.
function M.file_bytes(srv)
  return proc.json.decode(proc.readfile_cmd(M.CURL .. proc.q(srv.base .. "/_faults/stats"))).file_bytes
end

-- Whether, within 20 s, the temporary luaretry writes beside dir/name
-- held n bytes at least (a download under way, long before its end).
function M.grown(dir, name, n)
  local prefix = "^" .. name:gsub("%p", "%%%0") .. "%.luaretry%-"
  return proc.wait_for(function ()
    for _, f in ipairs(proc.ls(dir)) do
      if f:match(prefix) then
        local s = proc.readfile(dir .. "/" .. f)
        if s and #s >= n then return true end
      end
    end
  end, 20) or false
end

return M
