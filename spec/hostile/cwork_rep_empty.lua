-- C work: string.rep of an empty string 2^63 times, a separator too
-- drive: harmless; expect: retry
max_attempts = 3
function is_transient(status)
  return status == 503 and string.rep("", math.maxinteger) .. ("").rep("", math.maxinteger, "") == ""
end
