/* lstring.h: string.rep for the sandbox.  Same results and errors as Lua
 * 5.4's, but the copying is charged to the sandbox's budget, and an empty
 * result costs nothing, so no count of copies outruns the time (or
 * instruction) limit. */
#ifndef LUARETRY_LSTRING_H
#define LUARETRY_LSTRING_H

#include <lua.h>

/* Sets rep in the table at `idx` (the string library of a state made by
 * lr_sandbox_new).  May raise (memory). */
void lr_string_install(lua_State *L, int idx);

#endif
