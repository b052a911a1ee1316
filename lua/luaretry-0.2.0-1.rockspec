-- luarocks --lua-version=5.4 make lua/luaretry-0.2.0-1.rockspec  (from the top of the tree)
-- Debian's luarocks defaults to Lua 5.1: --lua-version=5.4 is needed there.
rockspec_format = "3.0"
package = "luaretry"
version = "0.2.0-1"
source = {
  url = "git+file:///luaretry",  -- `luarocks make` builds the tree it is run in
}
description = {
  summary = "A retry policy engine: C owns time, sandboxed Lua policies own judgement",
  detailed = [[
    The Lua module of luaretry: load retry policies (Lua scripts, run
    sandboxed), classify outcomes, compute schedules and run retried calls
    on the engine's monotonic or virtual clock.  The helper library and
    the shipped policies are installed beside the rock.
  ]],
  license = "MIT",
}
dependencies = {
  "lua >= 5.4, < 5.5",
}
build = {
  type = "make",
  build_target = "rock",
  build_variables = {
    ROCK_PREFIX = "$(PREFIX)",
    CFLAGS = "$(CFLAGS)",
  },
  install_target = "install-rock",
  install_variables = {
    INST_PREFIX = "$(PREFIX)",
    INST_LIBDIR = "$(LIBDIR)",
    INST_LUADIR = "$(LUADIR)",
  },
}
