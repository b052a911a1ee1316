max_attempts = 3
function is_transient() local s = ("x"):rep(1e9) return #s end
