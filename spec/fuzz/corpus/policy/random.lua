max_attempts = 4
function is_transient() return math.random(1, 10) > 3 and math.random() end
math.randomseed(1)
