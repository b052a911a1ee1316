/* sandbox_lib.c: the library a policy script sees: the base library
 * without dofile, loadfile and binary chunks, string (with the matcher of
 * lpattern.c), table (with insert, remove and move of ltable.c), math,
 * utf8, os.time/clock/date, a require that reaches only the script's
 * folder, lua/ and policies/, json on first use, print to the host's log.
 * pcall, xpcall and the coroutine functions are our own, so that once a
 * limit is hit no script code catches it: neither a pcall nor an xpcall
 * handler.  No coroutines: a script has none.  math.random draws from the
 * call's seeded stream. */
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "find.h"
#include "lpattern.h"
#include "ltable.h"
#include "sandbox.h"

/* Debian's lua-dkjson: json.encode / json.decode for scripts */
#ifndef LUARETRY_DKJSON
#define LUARETRY_DKJSON "/usr/share/lua/5.4/dkjson.lua"
#endif

const char *luaretry_lua_version(void) {
  return LUA_RELEASE;
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

/* No __gc: a finalizer runs with hooks off, where no limit can stop it. */
static int safe_setmetatable(lua_State *L) {
  if (lua_type(L, 2) == LUA_TTABLE) {
    lua_pushliteral(L, "__gc");
    if (lua_rawget(L, 2) != LUA_TNIL)
      return luaL_error(L, "setmetatable: __gc is not allowed in policy scripts");
    lua_pop(L, 1);
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

static int safe_print(lua_State *L) {
  lr_sandbox *sb = lr_sandbox_of(L);
  int n = lua_gettop(L);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 1; i <= n; i++) {
    if (i > 1) luaL_addchar(&b, '\t');
    luaL_tolstring(L, i, NULL);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  if (sb->log && sb->log->fn) sb->log->fn(sb->log->ud, lua_tostring(L, -1));
  return 0;
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

/* require reaches the script's folder, the helper library and the shipped
 * policies, nothing else; modules load as text, cached per state. */
static int safe_require(lua_State *L) {
  lr_sandbox *sb = lr_sandbox_of(L);
  const char *name = luaL_checkstring(L, 1);
  lua_settop(L, 1);
  lua_pushvalue(L, lua_upvalueindex(1));  /* 2: cache */
  if (lua_getfield(L, 2, name) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  if (!valid_module_name(name))
    return luaL_error(L, "require: '%s' is not a module name", name);
  char rel[512], path[4700];
  lr_fmt(rel, sizeof rel, "%s", name);
  for (char *c = rel; *c; c++) if (*c == '.') *c = '/';
  const char *datadir = lr_datadir();
  const char *dirs[3] = { sb->script_dir, NULL, NULL };
  char lua_dir[4200], pol_dir[4200];
  lr_fmt(lua_dir, sizeof lua_dir, "%s/lua", datadir);
  lr_fmt(pol_dir, sizeof pol_dir, "%s/policies", datadir);
  dirs[1] = lua_dir;
  dirs[2] = pol_dir;
  for (int i = 0; i < 3; i++) {
    if (!dirs[i][0]) continue;
    lr_fmt(path, sizeof path, "%s/%s.lua", dirs[i], rel);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    fclose(f);
    if (luaL_loadfilex(L, path, "t") != LUA_OK) return lua_error(L);
    lua_pushstring(L, name);
    lua_call(L, 1, 1);
    if (lua_isnil(L, -1)) { lua_pop(L, 1); lua_pushboolean(L, 1); }
    lua_pushvalue(L, -1);
    lua_setfield(L, 2, name);
    return 1;
  }
  return luaL_error(L, "require: module '%s' not found in the script's folder, "
                    "%s or %s", name, lua_dir, pol_dir);
}

/* json.X on first use: loads dkjson (pure Lua, text only) into this state
 * and keeps its encode and decode, so a policy that never touches json
 * pays no memory for it. */
static int json_index(lua_State *L) {
  if (luaL_loadfilex(L, LUARETRY_DKJSON, "t") != LUA_OK)
    return luaL_error(L, "json: %s (is lua-dkjson installed?)", lua_tostring(L, -1));
  lua_call(L, 0, 1);
  if (!lua_istable(L, -1)) return luaL_error(L, "json: %s did not return a table", LUARETRY_DKJSON);
  static const char *const kept[] = { "encode", "decode", "null", NULL };
  for (int i = 0; kept[i]; i++) {
    lua_getfield(L, -1, kept[i]);
    lua_setfield(L, 1, kept[i]);
  }
  lua_pushvalue(L, 2);
  lua_rawget(L, 1);
  return 1;
}

/* ---- protected calls a kill goes through */

static int pcall_done(lua_State *L, int status, lua_KContext extra) {
  lr_sandbox *sb = lr_sandbox_of(L);
  if (sb->killed) return lr_sandbox_kill(L, sb, sb->killed);
  if (status != LUA_OK && status != LUA_YIELD) {
    lua_pushboolean(L, 0);
    lua_pushvalue(L, -2);
    return 2;
  }
  return lua_gettop(L) - (int)extra;
}

static int safe_pcall(lua_State *L) {
  luaL_checkany(L, 1);
  lua_pushboolean(L, 1);
  lua_insert(L, 1);
  int status = lua_pcallk(L, lua_gettop(L) - 2, LUA_MULTRET, 0, 0, pcall_done);
  return pcall_done(L, status, 0);
}

/* The script's message handler runs only while nothing is killed. */
static int guarded_handler(lua_State *L) {
  if (lr_sandbox_of(L)->killed) return 1;
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

static int safe_xpcall(lua_State *L) {
  int n = lua_gettop(L);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_pushvalue(L, 2);
  lua_pushcclosure(L, guarded_handler, 1);
  lua_replace(L, 2);
  lua_pushboolean(L, 1);
  lua_pushvalue(L, 1);
  lua_rotate(L, 3, 2);  /* true and f go after the handler */
  int status = lua_pcallk(L, n - 2, LUA_MULTRET, 2, 2, pcall_done);
  return pcall_done(L, status, 2);
}

/* ---- math.random from the call's stream */

/* Uniform in [0, span], without bias: draws under the smallest mask that
 * covers span, again while above it. */
static uint64_t uniform_to(lr_rng *r, uint64_t x, uint64_t span) {
  if ((span & (span + 1)) == 0) return x & span;
  uint64_t mask = span;
  for (int shift = 1; shift < 64; shift *= 2) mask |= mask >> shift;
  while ((x &= mask) > span) x = lr_rng_next(r);
  return x;
}

static int safe_random(lua_State *L) {
  lr_sandbox *sb = lr_sandbox_of(L);
  lr_rng *r = sb->rng ? sb->rng : &sb->load_rng;
  uint64_t x = lr_rng_next(r);
  lua_Integer lo, up;
  switch (lua_gettop(L)) {
  case 0:
    lua_pushnumber(L, (double)(x >> 11) * 0x1.0p-53);
    return 1;
  case 1:
    lo = 1;
    up = luaL_checkinteger(L, 1);
    if (up == 0) {  /* random(0): every bit random, as Lua's */
      lua_pushinteger(L, (lua_Integer)x);
      return 1;
    }
    break;
  case 2:
    lo = luaL_checkinteger(L, 1);
    up = luaL_checkinteger(L, 2);
    break;
  default:
    return luaL_error(L, "wrong number of arguments");
  }
  luaL_argcheck(L, lo <= up, lua_gettop(L), "interval is empty");
  uint64_t v = uniform_to(r, x, (uint64_t)up - (uint64_t)lo);
  lua_pushinteger(L, (lua_Integer)(v + (uint64_t)lo));
  return 1;
}

static int refuse_randomseed(lua_State *L) {
  return luaL_error(L, "math.randomseed: math.random draws from the call's own seeded "
                    "stream (the host's seed, --seed); a script cannot reseed it");
}

/* ---- the state's globals */

static void keep_fields(lua_State *L, const char *lib, lua_CFunction open,
                        const char *const *names) {
  lua_pushcfunction(L, open);
  lua_call(L, 0, 1);
  lua_newtable(L);
  for (; *names; names++) {
    lua_getfield(L, -2, *names);
    lua_setfield(L, -2, *names);
  }
  lua_setglobal(L, lib);
  lua_pop(L, 1);
}

/* Replaces lib[name] (global when lib is NULL) by f, with the original as
 * its upvalue when `keep` is set. */
static void replace(lua_State *L, const char *lib, const char *name, lua_CFunction f,
                    int keep) {
  if (lib) lua_getglobal(L, lib);
  else lua_pushglobaltable(L);
  if (keep) {
    lua_getfield(L, -1, name);
    lua_pushcclosure(L, f, 1);
  } else {
    lua_pushcfunction(L, f);
  }
  lua_setfield(L, -2, name);
  lua_pop(L, 1);
}

int lr_sandbox_open_libs(lua_State *L) {
  luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
  luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
  luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
  luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
  luaL_requiref(L, LUA_UTF8LIBNAME, luaopen_utf8, 1);
  lua_settop(L, 0);
  static const char *const os_kept[] = { "time", "clock", "date", NULL };
  keep_fields(L, LUA_OSLIBNAME, luaopen_os, os_kept);

  lua_pushnil(L); lua_setglobal(L, "dofile");
  lua_pushnil(L); lua_setglobal(L, "loadfile");
  /* The string metatable's __index is this table: removing dump here
   * removes ("x"):dump too. */
  lua_getglobal(L, LUA_STRLIBNAME);
  lua_pushnil(L); lua_setfield(L, -2, "dump");
  /* and find, match, gmatch, gsub are bounded like the script */
  lr_pattern_install(L, -1);
  lua_pop(L, 1);
  /* and insert, remove and move pay for each element they shift */
  lua_getglobal(L, LUA_TABLIBNAME);
  lr_table_install(L, -1);
  lr_sort_install(L, -1);
  lua_pop(L, 1);
  replace(L, NULL, "load", safe_load, 1);
  replace(L, NULL, "setmetatable", safe_setmetatable, 1);
  replace(L, NULL, "print", safe_print, 0);
  replace(L, NULL, "pcall", safe_pcall, 0);
  replace(L, NULL, "xpcall", safe_xpcall, 0);
  replace(L, LUA_MATHLIBNAME, "random", safe_random, 0);
  replace(L, LUA_MATHLIBNAME, "randomseed", refuse_randomseed, 0);
  lua_newtable(L);
  lua_pushcclosure(L, safe_require, 1);
  lua_setglobal(L, "require");
  lua_newtable(L);
  lua_newtable(L);
  lua_pushcfunction(L, json_index);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  lua_setglobal(L, "json");
  return 0;
}
