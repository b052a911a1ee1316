-- Progress (issue 31): one transfer shows a meter on a terminal (every
-- attempt's bytes, the wait between attempts, -# a bar; --no-progress-meter
-- and -s none), a batch one live status line; a pipe gets neither, and a
-- batch off a terminal prints the lines of the URLs that failed and a
-- summary.  A real terminal: tmux, its pane read with capture-pane.
local here = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")) or "spec"
package.path = here .. "/?.lua;" .. package.path
local proc = require "support.proc"
local q = proc.q
local system = require "system"

local function bin()
  local b = proc.bin
  if b:sub(1, 1) ~= "/" then b = os.getenv("PWD") .. "/" .. b end
  return b
end

-- A tmux session of its own (a name no other test uses), w x h, running
-- luaretry with args, then holding the pane open.
local serial = 0
local Pane = {}
Pane.__index = Pane

local function pane(args, w, h, dir)
  serial = serial + 1
  local name = ("luaretry-spec-%d-%d"):format(tonumber(proc.readfile("/proc/self/stat"):match("^%d+")), serial)
  local words = {}
  for _, a in ipairs(args) do words[#words + 1] = q(a) end
  local cmd = "cd " .. q(dir) .. " && " .. q(bin()) .. " run " .. table.concat(words, " ") ..
              "; echo EXIT=$?; sleep 60"
  proc.sh("env -u TMUX tmux -L " .. q(name) .. " new-session -d -s " .. q(name) .. " -x " .. w ..
          " -y " .. h .. " " .. q(cmd))
  return setmetatable({ name = name }, Pane)
end

function Pane:text()
  return proc.readfile_cmd("tmux -L " .. q(self.name) .. " capture-pane -p -t " .. q(self.name)) or ""
end

-- The pane once pred(text) holds (within seconds), or nil.
function Pane:wait(pred, seconds)
  local deadline = system.monotime() + (seconds or 20)
  repeat
    local t = self:text()
    if pred(t) then return t end
    system.sleep(0.05)
  until system.monotime() > deadline
end

function Pane:stop()
  proc.sh("tmux -L " .. q(self.name) .. " kill-server 2>/dev/null")
end

local function lines(text)
  local t = {}
  for l in text:gmatch("[^\n]*") do if l ~= "" then t[#t + 1] = l end end
  return t
end

describe("progress", function ()
  local srv, tmp
  proc.with_server(here .. "/fixtures/curl_compat/server.lua", function (s, t) srv, tmp = s, t end)

  describe("one transfer on a terminal", function ()
    it("a meter of every attempt's bytes, the wait between attempts, then the final line alone", function ()
      local p = pane({ "--set", "backoff.initial=2", "--set", "backoff.jitter=none", "--limit-rate", "5M",
                       "-o", tmp .. "/out", srv.base .. "/stream" }, 80, 24, tmp)
      finally(function () p:stop() end)
      -- after the 503: its log line on a line of its own, the meter saying the wait
      local waiting = p:wait(function (t) return t:find("retry 2 in %d+%.%d s") end)
      assert.is_truthy(waiting, p:text())
      assert.matches("\nluaretry: attempt 1/10: 503 %-> retry in 2%.000 s", "\n" .. waiting)
      -- the second attempt's bytes, paced: the meter counts them, with a speed
      local moving = p:wait(function (t) return t:find("attempt 2\n") and t:find("%d+%.?%d*[kM] +[%d.]+[kM]/s") end)
      assert.is_truthy(moving, p:text())
      local done = p:wait(function (t) return t:find("EXIT=0") end, 40)
      assert.is_truthy(done, p:text())
      -- the meter yielded its line: the final log line starts one, none is left
      assert.matches("\nluaretry: attempt 2/10: 200 %-> success", "\n" .. done)
      assert.is_nil(done:find("/s ", 1, true))
      for _, l in ipairs(lines(done)) do assert.is_true(#l <= 80) end
    end)

    it("-# draws a bar; --no-progress-meter and -s draw nothing", function ()
      local p = pane({ "-#", "--set", "backoff.initial=2", "-o", tmp .. "/out", srv.base .. "/once503" }, 80, 24, tmp)
      -- one finally for every pane: busted keeps only a test's last
      local panes = { p }
      finally(function () for _, x in ipairs(panes) do x:stop() end end)
      local bar = p:wait(function (t) return t:find("%s+%d+%.%d%%  retry 2 in") end)
      assert.is_truthy(bar, p:text())
      for _, args in ipairs({ { "--no-progress-meter" }, { "-s" } }) do
        srv:reset()
        local quiet = pane({ args[1], "--set", "backoff.initial=1", "-o", tmp .. "/out2", srv.base .. "/once503" },
                           80, 24, tmp)
        panes[#panes + 1] = quiet
        local done = quiet:wait(function (t) return t:find("EXIT=0") end)
        assert.is_truthy(done, quiet:text())
        assert.is_nil(done:find("retry 2 in", 1, true), args[1])
        if args[1] == "-s" then assert.are.same({ "EXIT=0" }, lines(done)) end
      end
    end)

    it("a terminal narrower than 20 columns: the meter still fits its line", function ()
      local p = pane({ "--set", "backoff.initial=2", "-o", tmp .. "/out", srv.base .. "/once503" }, 15, 24, tmp)
      finally(function () p:stop() end)
      local text = p:wait(function (t) return t:find("retry 2") or t:find("retr") end)
      assert.is_truthy(text, p:text())
      local all = lines(text)
      local last = all[#all]
      assert.is_true(#last <= 14, last)
    end)

    it("a pipe gets no meter: standard error holds lines only", function ()
      local r = proc.run({ "run", "--set", "backoff.initial=0.1", "-o", tmp .. "/out", srv.base .. "/once503" },
                         { timeout = 30 })
      assert.are.equal(0, r.code, r.stderr)
      assert.is_nil(r.stderr:find("[\r\27]"))
      assert.are.equal(2, #proc.lines(r.stderr))
    end)
  end)

  describe("a batch", function ()
    local function slow_urls(n)
      local t = {}
      for i = 1, n do
        t[#t + 1] = srv.base .. "/slow/" .. i
        t[#t + 1] = srv.base .. "/slow/flaky/" .. i
      end
      t[#t + 1] = srv.base .. "/404"
      return t
    end

    it("on a terminal: one live status line, the failed URL's line above it, the summary at the end", function ()
      local args = { "--parallel-max", "4", "--set", "backoff.initial=1", "--set", "backoff.jitter=none",
                     "--output-dir", tmp }
      for _, u in ipairs(slow_urls(6)) do args[#args + 1] = u end
      local p = pane(args, 200, 30, tmp)
      finally(function () p:stop() end)
      local live = p:wait(function (t)
        return t:find("%d+ done, %d+ in flight, %d+ waiting, %d+ throttled, %d+ failed, %d+B, [%d.]+[kM]?B/s, left ")
      end)
      assert.is_truthy(live, p:text())
      local waiting = p:wait(function (t) return t:find("[1-9]%d* waiting") end)
      assert.is_truthy(waiting, p:text())
      local done = p:wait(function (t) return t:find("EXIT=1") end, 60)
      assert.is_truthy(done, p:text())
      local l = lines(done)
      assert.matches("^luaretry: %[13%] http://[%d.:]+/404: final, 1 attempt, status 404", l[1])
      assert.matches("^luaretry: 13 URLs: 12 succeeded, 1 failed, %d+ bytes, [%d.]+ s, exit 1$", l[2])
      assert.are.equal("EXIT=1", l[3])
      assert.are.equal(3, #l) -- no status line left, no attempt lines
    end)

    it("off a terminal: the lines of the URLs that failed and a summary; -v every attempt", function ()
      local urls = { srv.base .. "/a", srv.base .. "/once503", srv.base .. "/404", srv.base .. "/b" }
      local args = { "run", "--set", "backoff.initial=0.01" }
      for _, u in ipairs(urls) do args[#args + 1] = u end
      local r = proc.run(args, { timeout = 30 })
      assert.are.equal(1, r.code)
      local l = proc.lines(r.stderr)
      assert.are.equal(2, #l, r.stderr)
      assert.matches("^luaretry: %[3%] .*/404: final, 1 attempt, status 404", l[1])
      assert.matches("^luaretry: 4 URLs: 3 succeeded, 1 failed, %d+ bytes, [%d.]+ s, exit 1$", l[2])
      srv:reset()
      table.insert(args, 2, "-v")
      r = proc.run(args, { timeout = 30 })
      assert.is_truthy(r.stderr:find("[2] attempt 1/10: 503 -> retry", 1, true), r.stderr)
      assert.is_truthy(r.stderr:find("[1] " .. srv.base .. "/a: success", 1, true), r.stderr)
    end)
  end)
end)
