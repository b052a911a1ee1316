/* ltable.h: table.insert, table.remove, table.move, table.concat
 * (ltable.c) and table.sort (lsort.c) for the sandbox.  Same results and
 * errors as Lua 5.4's, but every element moved or read and every
 * comparison is charged to the sandbox's budget, so a range of a
 * quintillion empty slots, or a sort whose comparisons run in C, is
 * stopped by the time (or instruction) limit like a loop. */
#ifndef LUARETRY_LTABLE_H
#define LUARETRY_LTABLE_H

#include <lua.h>

/* Sets insert, remove, move and concat in the table at `idx` (the table
 * library of a state made by lr_sandbox_new).  May raise (memory). */
void lr_table_install(lua_State *L, int idx);

/* #t for a function that reads, writes and takes the length of argument
 * `arg` (a table, or a value with __index, __newindex and __len), with
 * Lua's error otherwise. */
lua_Integer lr_table_length(lua_State *L, int arg);

/* Sets sort (lsort.c) in the table at `idx`, as lr_table_install does
 * its four.  May raise (memory). */
void lr_sort_install(lua_State *L, int idx);

#endif
