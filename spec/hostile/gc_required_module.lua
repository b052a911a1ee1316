-- __gc: set by a required module (lib/finalizer.lua)
-- drive: load; expect: __gc is not allowed; where: finalizer.lua:3
max_attempts = 3
require "lib.finalizer"
