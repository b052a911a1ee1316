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
-- only the listed statuses (75 is EX_TEMPFAIL), every other one then final.
-- `--set options.final_if_output=PATTERN` makes a failure whose error output
-- (its last 64 KiB) matches the Lua pattern final, `retry_if_output`
-- transient (final first, then retry, then the exit codes).  `luaretry run`
-- spells them --final-on-exit, --retry-on-exit, --final-if-output,
-- --retry-if-output; its --retry-all-errors (`retry_all_errors=true`, a
-- field of every policy) retries every failure.
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

function is_transient(status, body, info)
  if info.kind ~= "command" then
    -- an HTTP outcome (a workflow): as the default classifier judges it
    if status == 0 then return info.error ~= "tls_verify" end
    return status == 408 or status == 429 or (status >= 500 and status <= 504 and status ~= 501)
  end
  if info.error then return true end  -- the attempt's timeout ended it
  if options.final_if_output ~= "" and body:find(options.final_if_output) then return false end
  if options.retry_if_output ~= "" and body:find(options.retry_if_output) then return true end
  if code_set("final_exit_codes")[status] then return false end
  if options.retry_exit_codes:find("%d") then return code_set("retry_exit_codes")[status] == true end
  return true
end
