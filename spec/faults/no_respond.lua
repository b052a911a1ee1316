-- Compiles and runs, but defines no `respond`.
local x = 1
