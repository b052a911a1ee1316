/* faults_sandbox.c: the fault server's script is a test fixture, but one
 * that may arrive from anywhere, so it runs in a sandbox: the base library
 * without dofile, loadfile and binary chunks, string, table, math, utf8,
 * coroutine and os.time/clock/date; no io, no os.execute, no debug, no
 * C modules.  require reaches the script's own folder and the system's
 * pure-Lua modules (dkjson), loaded as text into the same sandbox.  Memory
 * is bounded, and a stop of the server stops a script even in an endless
 * loop (a hook that fails at every count once the stop came). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "faults_int.h"

#define MEMORY_LIMIT ((size_t)256 * 1024 * 1024)
#define HOOK_COUNT 10000   /* instructions between looks at the stop flag */

static const char *const SYSTEM_DIRS[] = { "/usr/local/share/lua/5.4", "/usr/share/lua/5.4",
                                           NULL };

static void *bounded_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  lr_faults *f = ud;
  size_t old = ptr ? osize : 0;
  if (nsize == 0) {
    free(ptr);
    f->lua_bytes -= old;
    return NULL;
  }
  if (nsize > old && f->lua_bytes + (nsize - old) > MEMORY_LIMIT) return NULL;
  void *p = realloc(ptr, nsize);
  if (p) f->lua_bytes = f->lua_bytes - old + nsize;
  return p;
}

static void stop_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lr_faults *f = *(lr_faults **)lua_getextraspace(L);
  if (atomic_load(&f->stopping)) luaL_error(L, "the fault server is stopping");
}

static int safe_load(lua_State *L) {
  /* load(chunk [, chunkname [, mode [, env]]]) with mode forced to text */
  int has_env = lua_gettop(L) >= 4;
  lua_settop(L, 4);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  lua_pushliteral(L, "t");
  if (has_env) lua_pushvalue(L, 4);
  lua_call(L, has_env ? 4 : 3, LUA_MULTRET);
  return lua_gettop(L) - 4;
}

static int valid_module_name(const char *name) {
  if (!*name || *name == '.') return 0;
  for (const char *c = name; *c; c++) {
    if (c[0] == '.' && c[1] == '.') return 0;
    if (!(*c == '.' || *c == '_' || *c == '-' || (*c >= 'a' && *c <= 'z') ||
          (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')))
      return 0;
  }
  return 1;
}

/* A module of the script's folder or of the system's Lua path, as text. */
static int safe_require(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  lua_settop(L, 1);
  lua_pushvalue(L, lua_upvalueindex(1));  /* 2: cache */
  if (lua_getfield(L, 2, name) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  if (!valid_module_name(name)) return luaL_error(L, "require: '%s' is not a module name", name);
  char rel[256], path[4400];
  snprintf(rel, sizeof rel, "%s", name);
  for (char *c = rel; *c; c++) if (*c == '.') *c = '/';
  const char *dir = lua_tostring(L, lua_upvalueindex(2));
  for (int i = -1; i < 0 || SYSTEM_DIRS[i]; i++) {
    snprintf(path, sizeof path, "%s/%s.lua", i < 0 ? dir : SYSTEM_DIRS[i], rel);
    FILE *file = fopen(path, "r");
    if (!file) continue;
    fclose(file);
    if (luaL_loadfilex(L, path, "t") != LUA_OK) return lua_error(L);
    lua_pushstring(L, name);
    lua_call(L, 1, 1);
    if (lua_isnil(L, -1)) { lua_pop(L, 1); lua_pushboolean(L, 1); }
    lua_pushvalue(L, -1);
    lua_setfield(L, 2, name);
    return 1;
  }
  return luaL_error(L, "require: module '%s' not found in the script's folder nor the "
                    "system's Lua path", name);
}

/* os with time, clock and date only. */
static void trim_os(lua_State *L) {
  static const char *const kept[] = { "time", "clock", "date", NULL };
  lua_newtable(L);
  lua_getglobal(L, "os");
  for (int i = 0; kept[i]; i++) {
    lua_getfield(L, -1, kept[i]);
    lua_setfield(L, -3, kept[i]);
  }
  lua_pop(L, 1);
  lua_setglobal(L, "os");
}

static int open_sandbox(lua_State *L) {
  const char *dir = lua_tostring(L, 1);
  static const luaL_Reg libs[] = {
    { LUA_GNAME, luaopen_base }, { LUA_STRLIBNAME, luaopen_string },
    { LUA_TABLIBNAME, luaopen_table }, { LUA_MATHLIBNAME, luaopen_math },
    { LUA_UTF8LIBNAME, luaopen_utf8 }, { LUA_COLIBNAME, luaopen_coroutine },
    { LUA_OSLIBNAME, luaopen_os }, { NULL, NULL } };
  for (const luaL_Reg *l = libs; l->func; l++) {
    luaL_requiref(L, l->name, l->func, 1);
    lua_pop(L, 1);
  }
  trim_os(L);
  static const char *const gone[] = { "dofile", "loadfile", NULL };
  for (int i = 0; gone[i]; i++) {
    lua_pushnil(L);
    lua_setglobal(L, gone[i]);
  }
  lua_getglobal(L, "load");
  lua_pushcclosure(L, safe_load, 1);
  lua_setglobal(L, "load");
  lua_newtable(L);
  lua_pushstring(L, dir);
  lua_pushcclosure(L, safe_require, 2);
  lua_setglobal(L, "require");
  return 0;
}

lua_State *fault_sandbox_new(lr_faults *f, const char *script_path, char *err, size_t errlen) {
  lua_State *L = lua_newstate(bounded_alloc, f);
  if (!L) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  *(lr_faults **)lua_getextraspace(L) = f;
  lua_sethook(L, stop_hook, LUA_MASKCOUNT, HOOK_COUNT);
  const char *slash = script_path ? strrchr(script_path, '/') : NULL;
  lua_pushcfunction(L, open_sandbox);
  if (slash) lua_pushlstring(L, script_path, (size_t)(slash - script_path));
  else lua_pushliteral(L, ".");
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    snprintf(err, errlen, "%s", lua_tostring(L, -1));
    lua_close(L);
    return NULL;
  }
  return L;
}
