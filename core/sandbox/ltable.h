/* ltable.h: table.insert, table.remove and table.move for the sandbox.
 * Same results and errors as Lua 5.4's, but every element moved is
 * charged to the sandbox's budget, so a range of a quintillion empty slots
 * is stopped by the time (or instruction) limit like a loop. */
#ifndef LUARETRY_LTABLE_H
#define LUARETRY_LTABLE_H

#include <lua.h>

/* Sets insert, remove and move in the table at `idx` (the table library
 * of a state made by lr_sandbox_new).  May raise (memory). */
void lr_table_install(lua_State *L, int idx);

#endif
