/* lint.c: what `luaretry check` asks of a load beyond loading it: reads of
 * undefined globals inside hooks (a trap on the globals: an __index that
 * notes the reader's file and line, so `return statuss == 429` is found
 * when a probe runs it); warnings in line order. */
#include <lauxlib.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

/* The line a warning names in the script itself ("SRC:LINE: ..."); those
 * that name none (or another file) go after them. */
static long warning_line(const char *w, const char *src) {
  size_t n = strlen(src);
  if (strncmp(w, src, n) != 0 || w[n] != ':' || w[n + 1] < '0' || w[n + 1] > '9') return LONG_MAX;
  return strtol(w + n + 1, NULL, 10);
}

/* Warnings in line order, the same on every run (unknown names are found
 * in a table's order, which changes from run to run); stable. */
void lr_sort_warnings(char **w, size_t n, const char *src) {
  for (size_t i = 1; i < n; i++) {
    char *x = w[i];
    long line = warning_line(x, src);
    size_t j = i;
    for (; j > 0 && warning_line(w[j - 1], src) > line; j--) w[j] = w[j - 1];
    w[j] = x;
  }
}

void luaretry_policy_warn_undefined_globals(luaretry_policy *p, int on) {
  if (lr_policy_ok(p)) p->warn_globals = on != 0;
}

/* One warning per file, line and name, under the lock. */
static void note_read(luaretry_policy *p, const char *src, int line, const char *name) {
  char text[600];
  lr_fmt(text, sizeof text,
         "%s:%d: %s: read of an undefined global inside a hook (a typo? "
         "make it local, or set it at the top level)",
         src, line, name);
  pthread_mutex_lock(&p->lock);
  int seen = 0;
  for (size_t i = 0; i < p->warning_count && !seen; i++) seen = strcmp(p->warnings[i], text) == 0;
  if (!seen) {
    lr_add_warning(p->warnings, &p->warning_count, "%s", text);
    lr_sort_warnings(p->warnings, p->warning_count, p->source);
  }
  pthread_mutex_unlock(&p->lock);
}

/* __index on the globals: (t, name); nil, as without the trap.  Level 1
 * is the function that read the name; a C function has no line. */
static int trap_index(lua_State *L) {
  lr_gen *g = lua_touserdata(L, lua_upvalueindex(1));
  lua_Debug ar;
  size_t n;
  /* dkjson probes for optional globals of its own: not the script's typo */
  if (lua_type(L, 2) == LUA_TSTRING && lua_getstack(L, 1, &ar) && lua_getinfo(L, "Sl", &ar) &&
      ar.currentline > 0 &&
      !((n = strlen(ar.short_src)) >= 10 && strcmp(ar.short_src + n - 10, "dkjson.lua") == 0))
    note_read(g->p, ar.short_src, ar.currentline, lua_tostring(L, 2));
  return 0;
}

void lr_lint_trap_globals(lua_State *L, lr_gen *g) {
  if (!g->p->warn_globals) return;
  lua_pushglobaltable(L);
  if (lua_getmetatable(L, -1)) { /* the script's own (a strict mode): leave it */
    lua_pop(L, 2);
    return;
  }
  lua_createtable(L, 0, 1);
  lua_pushlightuserdata(L, g);
  lua_pushcclosure(L, trap_index, 1);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  lua_pop(L, 1);
}
