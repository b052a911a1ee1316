-- errors: on_retry raises a table: reported, the decision stands
-- drive: retry_hook; expect: error object is a table value
max_attempts = 3
function on_retry(info)
  error({ attempt = info.attempt }) -- HERE
end
