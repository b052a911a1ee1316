-- policies/command.lua: a command run again until it succeeds.
--
-- What `luaretry run -- COMMAND` uses when no POLICY is named.  Exit
-- status 0 is success; every other one is transient (a flaky network, a
-- lock held, a service starting), except those no second run can change:
--   126  the command cannot be executed (a shell's and execvp's "permission
--        denied", "exec format error");
--   127  the command was not found;
--   130  killed by SIGINT, 143 by SIGTERM: someone stopped it on purpose
--        (a stop signal to luaretry itself cancels the whole run anyway).
-- `--set options.final_exit_codes=1,126,127` changes that list (numbers
-- separated by commas or spaces); `--set options.retry_exit_codes=75` retries
-- only the listed statuses (75 is EX_TEMPFAIL), every other one then final,
-- and a listed one is retried even where final_exit_codes names it (130:
-- asked for by name, it is meant).
-- `--set options.final_if_output=PATTERN` makes a failure whose error output
-- (its last 64 KiB) matches the Lua pattern final, `retry_if_output`
-- transient (final first, then retry, then the exit codes).  `luaretry run`
-- spells them --final-on-exit, --retry-on-exit, --final-if-output,
-- --retry-if-output; its --retry-all-errors (`retry_all_errors=true`, a
-- field of every policy) retries every failure.
-- Every option is read whole at every command's outcome, before it is
-- judged: a bad one is an error that names it at the first attempt (and
-- under `luaretry check`, whose probes are exit statuses for this policy),
-- whatever the status or the output.
-- An attempt that its timeout ended is transient too.
--
-- Five attempts in all, 5 minutes for one attempt, 10 for the whole call;
-- waits of 1 s doubling to 30 s, plus up to 1 s of random extra each, so
-- that many hosts running the same job spread out.

name = "command"
max_attempts = 5
deadline = 600
attempt_timeout = 300
backoff = { kind = "exponential", initial = 1, multiplier = 2, max = 30,
            jitter = "additive", jitter_max = 1, cap_jitter = false }

options = { final_exit_codes = "126,127,130,143", retry_exit_codes = "",
            final_if_output = "", retry_if_output = "" }

-- "1, 2 3" -> { [1] = true, [2] = true, [3] = true }; a word that is not a
-- whole number is an error that names the option.
local function code_set(name)
  local set = {}
  for word in options[name]:gmatch("[^%s,]+") do
    local n = tonumber(word)
    if not n or n ~= math.floor(n) or n < 0 or n > 255 then
      error(("options.%s: %q is not an exit status (0 to 255)"):format(name, word))
    end
    set[n] = true
  end
  return set
end

-- Why the Lua pattern p does not compile, or nil.  string.find raises
-- only when a match reaches the fault ("a[" says nothing over an output
-- without an "a"), so the whole pattern is read here, by the rules of Lua
-- 5.4's lstrlib.c (classEnd, matchbalance, start_capture, check_capture).
local function pattern_problem(p)
  local n, level, open, closed = #p, 0, {}, {}
  -- the index after a class's "]", j after its "[", or nil
  local function class_end(j)
    if p:sub(j, j) == "^" then j = j + 1 end
    repeat
      if j > n then return nil end
      if p:sub(j, j) == "%" and j < n then j = j + 1 end
      j = j + 1
    until p:sub(j, j) == "]"
    return j + 1
  end
  local i = p:sub(1, 1) == "^" and 2 or 1
  while i <= n do
    local c, d = p:sub(i, i), p:sub(i + 1, i + 1)
    if c == "(" then
      if level == 32 then return "too many captures" end
      level = level + 1
      if d == ")" then closed[level], i = true, i + 2 -- a position capture
      else open[#open + 1], i = level, i + 1 end
    elseif c == ")" then
      if #open == 0 then return "invalid pattern capture (a ')' without '(')" end
      closed[table.remove(open)], i = true, i + 1
    elseif c == "%" and d == "b" then
      if i + 3 > n then return "missing arguments to '%b'" end
      i = i + 4
    elseif c == "%" and d == "f" then
      if p:sub(i + 2, i + 2) ~= "[" then return "missing '[' after '%f' in pattern" end
      i = class_end(i + 3)
      if not i then return "malformed pattern (missing ']')" end
    elseif c == "%" and d:find("^%d$") then
      if not closed[tonumber(d)] then return "invalid capture index %" .. d end
      i = i + 2
    else
      if c == "[" then
        i = class_end(i + 1)
        if not i then return "malformed pattern (missing ']')" end
      elseif c == "%" then
        if i == n then return "malformed pattern (ends with '%')" end
        i = i + 2
      else
        i = i + 1
      end
      if p:sub(i, i):find("^[*+?-]$") then i = i + 1 end
    end
  end
  if #open > 0 then return "unfinished capture" end
  return nil
end

-- options[name], a pattern that compiles, or an error that names it.
local function pattern(name)
  local p = options[name]
  local why = p ~= "" and pattern_problem(p)
  if why then error(("options.%s: %q does not compile: %s"):format(name, p, why)) end
  return p
end

-- Each pattern is matched in a chunk named for its option: a match that
-- reaches the time limit (a pattern that backtracks, ".-.-b", over a long
-- output) is said at that name (`--retry-if-output (options.retry_if_output):1:
-- time limit reached`), not at a line of this file.
local function matcher(name, option)
  return assert(load("local body, p = ...; return body:find(p) ~= nil",
                     ("=%s (options.%s)"):format(option, name), "t", {}))
end
local matches = { final_if_output = matcher("final_if_output", "--final-if-output"),
                  retry_if_output = matcher("retry_if_output", "--retry-if-output") }

local retry = require "retry"

function is_transient(status, body, info)
  if info.kind ~= "command" then
    -- an HTTP outcome (a workflow): as the default classifier judges it
    if status == 0 then return not retry.final_error(info.error) end
    return status == 408 or status == 429 or (status >= 500 and status <= 504 and status ~= 501)
  end
  local final_codes, retry_codes = code_set("final_exit_codes"), code_set("retry_exit_codes")
  local final_output, retry_output = pattern("final_if_output"), pattern("retry_if_output")
  if info.error then return true end  -- the attempt's timeout ended it
  if final_output ~= "" and matches.final_if_output(body, final_output) then return false end
  if retry_output ~= "" and matches.retry_if_output(body, retry_output) then return true end
  -- a status retry_exit_codes names is retried, final by default or not
  if next(retry_codes) then return retry_codes[status] == true end
  return not final_codes[status]
end
