-- The corpus (spec/fixtures/curl_corpus.txt): lines that use `curl --retry`
-- as scripts write them, each run twice against the fault server (its URLs
-- rewritten there, every path failing once first): with `curl` being
-- `luaretry run`, then with curl itself on the same server, its paths
-- answering at once by then (curl's own retries cost a second each; what
-- is compared is where a line ends up).  Each line either works as curl's
-- (the same files with the same bytes, the same standard output, the same
-- exit status class: 0 or not) or exits 2 naming the one option of the line
-- that luaretry lacks.  Standard output may lack what curl writes of a
-- failed attempt before the final one's (curl never takes back what it
-- wrote to a pipe; luaretry shows the final attempt's only).
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
package.path = here .. "/?.lua;" .. package.path
local proc = require "support.proc"
local q = proc.q

local CORPUS = here .. "/fixtures/curl_corpus.txt"

local function corpus()
  local t = {}
  for line in io.lines(CORPUS) do
    if line:find("^curl ") then t[#t + 1] = line end
  end
  return t
end

-- Every file under dir (but the inputs), path -> bytes.
local function files(dir)
  local t = {}
  local list = proc.readfile_cmd("cd " .. q(dir) .. " && find . -type f | sort")
  for path in list:gmatch("[^\n]+") do
    if not path:find("^%./%.") and path ~= "./payload.txt" and path ~= "./artifact.bin" then
      t[path] = proc.readfile(dir .. "/" .. path)
    end
  end
  return t
end

-- Runs `line` (sh) in a fresh folder with bin first on PATH; its exit
-- status, standard output and error, and the files it left.
local function run_line(line, bin, tmp, n)
  local dir = ("%s/%s%d"):format(tmp, bin:match("[^/]+$"), n)
  proc.sh("mkdir -p " .. q(dir .. "/home"))
  proc.writefile(dir .. "/payload.txt", "the payload\n")
  proc.writefile(dir .. "/artifact.bin", "\0\1\2 artifact\n")
  local env = "PATH=" .. q(bin) .. ":/usr/bin:/bin VERSION=1.2.3 ARCH=amd64 TOKEN=t0ken HOME=" .. q(dir .. "/home")
  -- no sanitizer runtime preloaded: curl hangs with it (support/proc.lua)
  local code = proc.sh("cd " .. q(dir) .. " && timeout -s KILL 60 env -u LD_PRELOAD " .. env .. " sh -c " .. q(line) ..
                       " </dev/null >.out 2>.err")
  local r = { code = code, stdout = proc.readfile(dir .. "/.out"), stderr = proc.readfile(dir .. "/.err"),
              files = files(dir) }
  return r
end

describe("the corpus of `curl --retry` lines", function ()
  local srv, tmp, as_luaretry, as_curl

  setup(function ()
    srv = proc.server(here .. "/fixtures/curl_corpus/server.lua")
    tmp = proc.tmpdir()
    local bin = proc.bin
    if bin:sub(1, 1) ~= "/" then bin = os.getenv("PWD") .. "/" .. bin end
    -- curl as `luaretry run`: the line's own options after the quick
    -- backoff, so its --retry-delay still wins
    as_luaretry = tmp .. "/luaretry"
    proc.sh("mkdir -p " .. q(as_luaretry) .. " " .. q(tmp .. "/curl"))
    proc.writefile(as_luaretry .. "/curl", "#!/bin/sh\nexec " .. q(bin) ..
                   " run --set backoff.initial=0.05 --set backoff.jitter_max=0.05 \"$@\"\n")
    -- sudo -E bash -: the command itself, no root needed
    local sudo = "#!/bin/sh\nwhile [ \"${1#-}\" != \"$1\" ]; do shift; done\nexec \"$@\"\n"
    proc.writefile(as_luaretry .. "/sudo", sudo)
    as_curl = tmp .. "/curl"
    proc.writefile(as_curl .. "/sudo", sudo)
    proc.sh("chmod +x " .. q(as_luaretry) .. "/* " .. q(as_curl) .. "/*")
  end)
  teardown(function ()
    if srv then srv:stop() end
    proc.rmtree(tmp)
  end)

  it("holds at least 40 lines", function ()
    assert.is_true(#corpus() >= 40, #corpus() .. " lines")
  end)

  it("each line works as curl's, or exits 2 naming the one option it lacks", function ()
    local works, lacks, wrong = 0, {}, {}
    for n, original in ipairs(corpus()) do
      local line = original:gsub("https?://[%w%.%-]+:?%d*", srv.base)
      srv:reset()
      local mine = run_line(line, as_luaretry, tmp, n)
      -- (a line piped into sh exits as sh does: the message tells)
      local opt = (mine.stderr or ""):match("run: curl's (%S+) is not taken")
      if opt and (" " .. original .. " "):find(" " .. opt:gsub("%p", "%%%0") .. "[ =]") then
        lacks[#lacks + 1] = opt
      else
        local theirs = run_line(line, as_curl, tmp, n)
        local same = (mine.code == 0) == (theirs.code == 0)
        local why = not same and ("exit %d, curl's %d"):format(mine.code, theirs.code) or nil
        for path, bytes in pairs(theirs.files) do
          if mine.files[path] ~= bytes then why = why or ("%s differs"):format(path) end
        end
        for path in pairs(mine.files) do
          if not theirs.files[path] then why = why or ("%s is luaretry's only"):format(path) end
        end
        -- -I's headers carry the server's Date: only their first line
        local out_mine, out_theirs = mine.stdout, theirs.stdout
        if original:find(" %-I ") then
          out_mine, out_theirs = (out_mine or ""):match("^[^\r\n]*"), (out_theirs or ""):match("^[^\r\n]*")
        end
        local tail = out_theirs and out_mine and out_theirs:sub(-#out_mine) == out_mine and #out_mine > 0
        if out_mine ~= out_theirs and not tail then why = why or ("stdout %q, curl's %q"):format(out_mine, out_theirs) end
        if why then
          wrong[#wrong + 1] = ("%d: %s\n   %s\n   %s"):format(n, original, why, mine.stderr or "")
        else
          works = works + 1
        end
      end
    end
    print(("\ncorpus: %d lines, %d work as curl's, %d lack one option (%s)"):format(
      #corpus(), works, #lacks, table.concat(lacks, ", ")))
    assert.are.same({}, wrong)
    assert.are.equal(#corpus(), works + #lacks)
  end)
end)
