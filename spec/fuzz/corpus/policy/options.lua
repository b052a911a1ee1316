max_attempts = 3
options = { strict = false, limit = 5, label = "x" }
function is_transient(status) if options.strict then return false end return status >= options.limit * 100 end
