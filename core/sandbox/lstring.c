/* lstring.c: string.rep as Lua 5.4.4's lstrlib.c has it (str_rep: same
 * checks, same errors, same result), but built so that no count of copies
 * runs long.
 *
 * Lua's loop makes one memcpy per copy in C, where no hook can stop it:
 * string.rep("", math.maxinteger) builds nothing, so no memory limit stops
 * it either, and it ran for ever.  Here an empty result is returned at
 * once, and any other is built by copying what is already built after
 * itself (so a few large copies, not n small ones), in pieces of at most
 * PIECE bytes, each paid for from sb->remaining (1 per BULK bytes, as the
 * pattern matcher pays) before it is made: the time (or instruction) limit
 * stops a long one between two pieces. */
#include <lauxlib.h>
#include <limits.h>
#include <string.h>

#include "lstring.h"
#include "sandbox.h"

#define BULK  16          /* bytes copied per unit of budget (lpattern.c's) */
#define PIECE (64 * 1024) /* bytes copied between two payments, at most */

/* lstrlib.c's MAXSIZE: a result longer than this is "too large" */
#define MAXSIZE (sizeof(size_t) < sizeof(int) ? (size_t) ~(size_t)0 : (size_t)INT_MAX)

static int str_rep(lua_State *L) {
  size_t l, lsep;
  const char *s = luaL_checklstring(L, 1, &l);
  lua_Integer n = luaL_checkinteger(L, 2);
  const char *sep = luaL_optlstring(L, 3, "", &lsep);
  /* nothing to build: Lua would still loop n times */
  if (n <= 0 || (l == 0 && lsep == 0)) {
    lua_pushliteral(L, "");
    return 1;
  }
  if (l + lsep < l || l + lsep > MAXSIZE / (size_t)n)
    return luaL_error(L, "resulting string too large");
  lr_sandbox *sb = lr_sandbox_of(L);
  size_t total = (size_t)n * l + (size_t)(n - 1) * lsep;
  luaL_Buffer b;
  char *p = luaL_buffinitsize(L, &b, total);
  /* the result repeats s..sep with this period from its start */
  size_t period = l + lsep, done = l;
  memcpy(p, s, l);
  if (done < total) {
    memcpy(p + done, sep, lsep);
    done += lsep;
  }
  /* whole periods at a time, so that each copy starts where the pattern
   * starts again; the last may be cut short */
  size_t most = PIECE / period > 0 ? PIECE / period * period : period;
  while (done < total) {
    size_t k = done < total - done ? done : total - done;
    if (k > most) k = most;
    lr_sandbox_pay(L, sb, 1 + k / BULK);
    memcpy(p + done, p, k);
    done += k;
  }
  luaL_pushresultsize(&b, total);
  return 1;
}

void lr_string_install(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_pushcfunction(L, str_rep);
  lua_setfield(L, idx, "rep");
}
