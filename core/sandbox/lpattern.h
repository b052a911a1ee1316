/* lpattern.h: string.find, string.match, string.gmatch and string.gsub for
 * the sandbox.  Same results and errors as Lua 5.4's, but every matching
 * step is charged to the sandbox's instruction budget, so a pattern that
 * backtracks for minutes is stopped by the instruction limit like a loop. */
#ifndef LUARETRY_LPATTERN_H
#define LUARETRY_LPATTERN_H

#include <lua.h>

/* Sets find, match, gmatch and gsub in the table at `idx` (the string
 * library of a state made by lr_sandbox_new).  May raise (memory). */
void lr_pattern_install(lua_State *L, int idx);

#endif
