-- metamethods: an __index that loops, reached at load
-- drive: load; expect: time limit reached
max_attempts = 3
local t = setmetatable({}, { __index = function() while true do end end }) -- HERE
local x = t.anything
