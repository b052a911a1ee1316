max_attempts = 2
local co = coroutine and coroutine.create(function() end)
function is_transient() return co == nil end
