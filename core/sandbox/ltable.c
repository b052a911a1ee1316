/* ltable.c: table.move, table.insert, table.remove and table.concat as
 * Lua 5.4.4's ltablib.c has them (and its names: tinsert, tremove, tmove,
 * tconcat, checktab, aux_getn, addfield) (same checks, same order of reads
 * and writes, same metamethods, same errors), but every element moved or
 * read is paid for from the sandbox's budget, as the pattern matcher pays
 * for its steps.
 *
 * Lua's own loop over the elements runs in C, where no hook can stop it,
 * and needs no memory: table.move({}, 1, math.maxinteger - 1, 2), or
 * table.insert(t, 1, x) where t's __len says math.maxinteger - 1, would
 * run for centuries past any time limit.  Here each element costs 1 of
 * sb->remaining: the instruction limit when the host set one, else steps
 * between two looks at the clock (lr_sandbox_refuel decides which). */
#include <lauxlib.h>

#include "ltable.h"
#include "sandbox.h"

#define TAB_R  1 /* read */
#define TAB_W  2 /* write */
#define TAB_L  4 /* length */
#define TAB_RW (TAB_R | TAB_W)

/* The argument table.remove's "position out of bounds" names: 1 up to Lua
 * 5.4.4, 2 in later releases. */
#define REMOVE_POS_ARG (LUA_VERSION_RELEASE_NUM <= 50404 ? 1 : 2)

static void pay_one(lua_State *L, lr_sandbox *sb) {
  if (--sb->remaining <= 0) lr_sandbox_refuel(L, sb);
}

static int checkfield(lua_State *L, const char *key, int n) {
  lua_pushstring(L, key);
  return lua_rawget(L, -n) != LUA_TNIL;
}

/* `arg` is a table, or has a metatable with the metamethods `what` needs. */
static void checktab(lua_State *L, int arg, int what) {
  if (lua_type(L, arg) == LUA_TTABLE) return;
  int n = 1; /* the metatable and the fields tested, to pop */
  if (lua_getmetatable(L, arg) && (!(what & TAB_R) || checkfield(L, "__index", ++n)) &&
      (!(what & TAB_W) || checkfield(L, "__newindex", ++n)) &&
      (!(what & TAB_L) || checkfield(L, "__len", ++n)))
    lua_pop(L, n);
  else
    luaL_checktype(L, arg, LUA_TTABLE); /* the error */
}

static lua_Integer aux_getn(lua_State *L, int arg, int what) {
  checktab(L, arg, what | TAB_L);
  return luaL_len(L, arg);
}

/* t[to] = t[from] */
static void shift(lua_State *L, lr_sandbox *sb, int src, lua_Integer from, int dst,
                  lua_Integer to) {
  pay_one(L, sb);
  lua_geti(L, src, from);
  lua_seti(L, dst, to);
}

static int tinsert(lua_State *L) {
  lr_sandbox *sb = lr_sandbox_of(L);
  lua_Integer e = aux_getn(L, 1, TAB_RW);
  e = (lua_Integer)((lua_Unsigned)e + 1u); /* the first empty element */
  lua_Integer pos;
  switch (lua_gettop(L)) {
  case 2: pos = e; break;
  case 3:
    pos = luaL_checkinteger(L, 2);
    luaL_argcheck(L, (lua_Unsigned)pos - 1u < (lua_Unsigned)e, 2, "position out of bounds");
    for (lua_Integer i = e; i > pos; i--) shift(L, sb, 1, i - 1, 1, i);
    break;
  default: return luaL_error(L, "wrong number of arguments to 'insert'");
  }
  lua_seti(L, 1, pos);
  return 0;
}

static int tremove(lua_State *L) {
  lr_sandbox *sb = lr_sandbox_of(L);
  lua_Integer size = aux_getn(L, 1, TAB_RW);
  lua_Integer pos = luaL_optinteger(L, 2, size);
  if (pos != size)
    luaL_argcheck(L, (lua_Unsigned)pos - 1u <= (lua_Unsigned)size, REMOVE_POS_ARG,
                  "position out of bounds");
  lua_geti(L, 1, pos);
  for (; pos < size; pos++) shift(L, sb, 1, pos + 1, 1, pos);
  lua_pushnil(L);
  lua_seti(L, 1, pos);
  return 1;
}

static int tmove(lua_State *L) {
  lr_sandbox *sb = lr_sandbox_of(L);
  lua_Integer f = luaL_checkinteger(L, 2), e = luaL_checkinteger(L, 3);
  lua_Integer t = luaL_checkinteger(L, 4);
  int tt = !lua_isnoneornil(L, 5) ? 5 : 1; /* the destination */
  checktab(L, 1, TAB_R);
  checktab(L, tt, TAB_W);
  if (e >= f) {
    luaL_argcheck(L, f > 0 || e < LUA_MAXINTEGER + f, 3, "too many elements to move");
    lua_Integer n = e - f + 1;
    luaL_argcheck(L, t <= LUA_MAXINTEGER - n + 1, 4, "destination wrap around");
    /* forward unless the ranges overlap in the same table with t above f */
    if (t > e || t <= f || (tt != 1 && !lua_compare(L, 1, tt, LUA_OPEQ)))
      for (lua_Integer i = 0; i < n; i++) shift(L, sb, 1, f + i, tt, t + i);
    else
      for (lua_Integer i = n - 1; i >= 0; i--) shift(L, sb, 1, f + i, tt, t + i);
  }
  lua_pushvalue(L, tt);
  return 1;
}

/* Lua's addfield, paid for: an __index that answers "" in C (as
 * table.concat itself does) reads a range of 2^63 elements building
 * nothing, so no memory limit stops it either. */
static void addfield(lua_State *L, lr_sandbox *sb, luaL_Buffer *b, lua_Integer i) {
  pay_one(L, sb);
  lua_geti(L, 1, i);
  if (!lua_isstring(L, -1))
    luaL_error(L, "invalid value (%s) at index %I in table for 'concat'", luaL_typename(L, -1),
               (LUAI_UACINT)i);
  luaL_addvalue(b);
}

static int tconcat(lua_State *L) {
  lr_sandbox *sb = lr_sandbox_of(L);
  luaL_Buffer b;
  lua_Integer last = aux_getn(L, 1, TAB_R);
  size_t lsep;
  const char *sep = luaL_optlstring(L, 2, "", &lsep);
  lua_Integer i = luaL_optinteger(L, 3, 1);
  last = luaL_optinteger(L, 4, last);
  luaL_buffinit(L, &b);
  for (; i < last; i++) {
    addfield(L, sb, &b, i);
    luaL_addlstring(&b, sep, lsep);
  }
  if (i == last) addfield(L, sb, &b, i);
  luaL_pushresult(&b);
  return 1;
}

lua_Integer lr_table_length(lua_State *L, int arg) { return aux_getn(L, arg, TAB_RW); }

void lr_table_install(lua_State *L, int idx) {
  static const luaL_Reg fns[] = { { "insert", tinsert },
                                  { "remove", tremove },
                                  { "move", tmove },
                                  { "concat", tconcat },
                                  { NULL, NULL } };
  idx = lua_absindex(L, idx);
  for (const luaL_Reg *f = fns; f->name; f++) {
    lua_pushcfunction(L, f->func);
    lua_setfield(L, idx, f->name);
  }
}
