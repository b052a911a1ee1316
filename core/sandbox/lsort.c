/* lsort.c: table.sort for the sandbox, after ltablib.c of Lua 5.4.4 (the
 * quicksort of Sedgewick's "Algorithms in Modula-3" as Lua has it, MIT
 * licence, Copyright (C) 1994-2022 Lua.org, PUC-Rio), with Lua's function
 * names (sort, auxsort, partition, choosePivot, sort_comp, set2) so the
 * two read side by side.  Same checks, comparisons, swaps and errors, with
 * two changes:
 *
 * - every comparison is paid for from the sandbox's budget (1, plus 1 per
 *   16 bytes two strings compared without a function may scan), as the
 *   pattern matcher and table.move pay for theirs.  Lua's sort runs in C;
 *   with no comparator, or a C one (math.ult), or strings compared whole
 *   (a table holding one 1 MiB string 20000 times), no hook ever runs and
 *   it would go on for minutes past the time limit.
 * - the pivot of a large or badly split interval is drawn from a fixed
 *   sequence, not from clock() and time(): the same table sorts the same
 *   way on every run (a fixed seed reproduces a call), and an input built
 *   to make it quadratic meets the time limit, not luck. */
#include <limits.h>
#include <lauxlib.h>

#include "ltable.h"
#include "sandbox.h"

typedef unsigned int IdxT;

/* Intervals above this many elements take a drawn pivot once one split
 * came out badly (Lua's RANLIMIT). */
#define RANLIMIT 100u

/* Bytes of a string comparison per unit of budget (lpattern.c's BULK). */
#define BULK 16

/* The next pivot draw (xorshift32 from a fixed seed, never 0), in place of
 * Lua's l_randomizePivot. */
static unsigned int l_randomizePivot(unsigned int *state) {
  unsigned int x = *state ? *state : 2463534242u;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  *state = x;
  return x;
}

static void set2(lua_State *L, IdxT i, IdxT j) {
  lua_seti(L, 1, i);
  lua_seti(L, 1, j);
}

/* a < b, the values at stack indices a and b (negative), by the function
 * at 2 or by Lua's "<"; paid for first. */
static int sort_comp(lua_State *L, lr_sandbox *sb, int a, int b) {
  size_t cost = 1;
  if (lua_isnil(L, 2)) {
    if (lua_type(L, a) == LUA_TSTRING && lua_type(L, b) == LUA_TSTRING) {
      size_t la = lua_rawlen(L, a), lb = lua_rawlen(L, b);
      cost += (la < lb ? la : lb) / BULK;
    }
    lr_sandbox_pay(L, sb, cost);
    return lua_compare(L, a, b, LUA_OPLT);
  }
  lr_sandbox_pay(L, sb, cost);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, a - 1); /* -1: the function above it */
  lua_pushvalue(L, b - 2); /* -2: the function and a */
  lua_call(L, 2, 1);
  int res = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return res;
}

/* With the pivot P at the top and in a[up - 1]: moves what is below P
 * before what is above it; P's final place. */
static IdxT partition(lua_State *L, lr_sandbox *sb, IdxT lo, IdxT up) {
  IdxT i = lo;     /* incremented before its first use */
  IdxT j = up - 1; /* decremented before its first use */
  /* a[lo .. i] <= P <= a[j .. up], a[up - 1] == P */
  for (;;) {
    while (lua_geti(L, 1, ++i), sort_comp(L, sb, -1, -2)) {
      if (i == up - 1) luaL_error(L, "invalid order function for sorting");
      lua_pop(L, 1);
    }
    while (lua_geti(L, 1, --j), sort_comp(L, sb, -3, -1)) {
      if (j < i) luaL_error(L, "invalid order function for sorting");
      lua_pop(L, 1);
    }
    if (j < i) { /* crossed: P goes to a[i] */
      lua_pop(L, 1);
      set2(L, up - 1, i);
      return i;
    }
    set2(L, i, j);
  }
}

/* A pivot in the middle half of [lo, up]. */
static IdxT choosePivot(IdxT lo, IdxT up, unsigned int rnd) {
  IdxT r4 = (up - lo) / 4;
  return rnd % (r4 * 2) + (lo + r4);
}

static void auxsort(lua_State *L, lr_sandbox *sb, IdxT lo, IdxT up, unsigned int rnd,
                    unsigned int *draws) {
  while (lo < up) { /* a loop for the larger half: the stack stays O(log n) */
    IdxT p, n;
    /* a[lo], a[p] and a[up] in order */
    lua_geti(L, 1, lo);
    lua_geti(L, 1, up);
    if (sort_comp(L, sb, -1, -2))
      set2(L, lo, up);
    else
      lua_pop(L, 2);
    if (up - lo == 1) break;
    if (up - lo < RANLIMIT || rnd == 0)
      p = (lo + up) / 2;
    else
      p = choosePivot(lo, up, rnd);
    lua_geti(L, 1, p);
    lua_geti(L, 1, lo);
    if (sort_comp(L, sb, -2, -1)) {
      set2(L, p, lo);
    } else {
      lua_pop(L, 1);
      lua_geti(L, 1, up);
      if (sort_comp(L, sb, -1, -2))
        set2(L, p, up);
      else
        lua_pop(L, 2);
    }
    if (up - lo == 2) break;
    lua_geti(L, 1, p); /* the pivot P */
    lua_pushvalue(L, -1);
    lua_geti(L, 1, up - 1);
    set2(L, p, up - 1); /* a[p] = a[up - 1]; a[up - 1] = P */
    p = partition(L, sb, lo, up);
    if (p - lo < up - p) {
      auxsort(L, sb, lo, p - 1, rnd, draws);
      n = p - lo;
      lo = p + 1;
    } else {
      auxsort(L, sb, p + 1, up, rnd, draws);
      n = up - p;
      up = p - 1;
    }
    if ((up - lo) / 128 > n) rnd = l_randomizePivot(draws); /* badly split */
  }
}

static int sort(lua_State *L) {
  lr_sandbox *sb = lr_sandbox_of(L);
  lua_Integer n = lr_table_length(L, 1);
  if (n > 1) {
    luaL_argcheck(L, n < INT_MAX, 1, "array too big");
    if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_settop(L, 2);
    unsigned int draws = 0;
    auxsort(L, sb, 1, (IdxT)n, 0, &draws);
  }
  return 0;
}

void lr_sort_install(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_pushcfunction(L, sort);
  lua_setfield(L, idx, "sort");
}
