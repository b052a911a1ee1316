/* sandbox.c: the Lua state a policy runs in.  Limits are enforced by the
 * allocator (memory) and a count hook (instructions); once hit, a limit
 * stays hit at every instruction until control is back in C, so a pcall in
 * the script cannot swallow it. */
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "lpattern.h"
#include "sandbox.h"

#ifndef LUARETRY_DATADIR
#define LUARETRY_DATADIR "/usr/local/share/luaretry"
#endif

/* Debian's lua-dkjson: json.encode / json.decode for scripts */
#ifndef LUARETRY_DKJSON
#define LUARETRY_DKJSON "/usr/share/lua/5.4/dkjson.lua"
#endif

#define HOOK_STEP 1000  /* instructions between two looks at the budget */

/* Where the script is: the innermost Lua function with a line. */
static void note_where(lr_sandbox *sb) {
  lua_Debug ar;
  for (int level = 0; lua_getstack(sb->L, level, &ar); level++) {
    if (lua_getinfo(sb->L, "Sl", &ar) && ar.currentline > 0) {
      lr_fmt(sb->where, sizeof sb->where, "%s:%d", ar.short_src,
               ar.currentline);
      return;
    }
  }
}

static void count_hook(lua_State *L, lua_Debug *ar) {
  lr_sandbox *sb = lr_sandbox_of(L);
  (void)ar;
  if (!sb->killed) {
    sb->remaining -= HOOK_STEP;
    if (sb->remaining > 0) return;
    sb->killed = LR_KILL_INSTRUCTIONS;
  }
  if (!sb->where[0]) note_where(sb);
  /* Sticky: from now on every instruction fails. */
  lua_sethook(L, count_hook, LUA_MASKCOUNT, 1);
  lua_pushliteral(L, "sandbox limit reached");
  lua_error(L);
}

static void *limited_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  lr_sandbox *sb = ud;
  size_t old = ptr ? osize : 0;
  if (nsize == 0) {
    free(ptr);
    sb->used -= old;
    return NULL;
  }
  if (nsize > old && sb->used - old + nsize > sb->limit) {
    if (sb->L && !sb->killed) {
      sb->killed = LR_KILL_MEMORY;
      note_where(sb);  /* reads the call stack only: allocates nothing */
      lua_sethook(sb->L, count_hook, LUA_MASKCOUNT, 1);
    }
    return NULL;
  }
  void *np = realloc(ptr, nsize);
  if (np) sb->used = sb->used - old + nsize;
  return np;
}

/* ---- the library a script sees */

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
  if (sb->log) sb->log(sb->log_ud, lua_tostring(L, -1));
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
  const char *datadir = getenv("LUARETRY_DATADIR");
  if (!datadir || !*datadir) datadir = LUARETRY_DATADIR;
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

static int setup(lua_State *L) {
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
  /* and find, match, gmatch, gsub pay for every step from the budget */
  lr_pattern_install(L, -1);
  lua_pop(L, 1);
  lua_getglobal(L, "load");
  lua_pushcclosure(L, safe_load, 1);
  lua_setglobal(L, "load");
  lua_getglobal(L, "setmetatable");
  lua_pushcclosure(L, safe_setmetatable, 1);
  lua_setglobal(L, "setmetatable");
  lua_pushcfunction(L, safe_print);
  lua_setglobal(L, "print");
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

lr_sandbox *lr_sandbox_new(size_t memory_limit, long instruction_limit,
                           const char *script_path) {
  lr_sandbox *sb = calloc(1, sizeof *sb);
  if (!sb) return NULL;
  /* The libraries need some room whatever the limit. */
  sb->limit = memory_limit < 64 * 1024 ? 64 * 1024 : memory_limit;
  sb->instruction_limit = instruction_limit;
  if (script_path) {
    lr_strlcpy(sb->script_dir, script_path, sizeof sb->script_dir);
    char *slash = strrchr(sb->script_dir, '/');
    if (slash) *slash = '\0';
    else strcpy(sb->script_dir, ".");
  }
  lua_State *L = lua_newstate(limited_alloc, sb);
  if (!L) { free(sb); return NULL; }
  *(lr_sandbox **)lua_getextraspace(L) = sb;
  sb->L = L;
  lua_sethook(L, count_hook, LUA_MASKCOUNT, HOOK_STEP);
  sb->remaining = instruction_limit;
  lua_pushcfunction(L, setup);
  if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
    lr_sandbox_free(sb);
    return NULL;
  }
  sb->limit = memory_limit;
  return sb;
}

void lr_sandbox_free(lr_sandbox *sb) {
  if (!sb) return;
  if (sb->L) lua_close(sb->L);
  free(sb);
}

luaretry_code lr_sandbox_call(lr_sandbox *sb, lua_CFunction f, void *arg,
                              int nresults, luaretry_code failure, char *err,
                              size_t errlen) {
  lua_State *L = sb->L;
  sb->remaining = sb->instruction_limit;
  sb->killed = LR_KILL_NONE;
  sb->where[0] = '\0';
  lua_pushcfunction(L, f);
  lua_pushlightuserdata(L, arg);
  int status = lua_pcall(L, 1, nresults, 0);
  if (status == LUA_OK && !sb->killed) return LUARETRY_OK;
  if (sb->killed) {
    if (status == LUA_OK) lua_pop(L, nresults);
    else lua_pop(L, 1);
    const char *where = sb->where[0] ? sb->where : "the script";
    if (sb->killed == LR_KILL_INSTRUCTIONS)
      lr_fmt(err, errlen, "%s: instruction limit reached (%ld instructions); "
               "a loop that never ends?", where, sb->instruction_limit);
    else
      lr_fmt(err, errlen, "%s: memory limit reached (%zu bytes)", where,
               sb->limit);
    sb->killed = LR_KILL_NONE;
    lua_sethook(L, count_hook, LUA_MASKCOUNT, HOOK_STEP);
    lua_gc(L, LUA_GCCOLLECT);
    return LUARETRY_E_LIMIT;
  }
  const char *msg = lua_tostring(L, -1);
  if (msg) lr_strlcpy(err, msg, errlen);
  else lr_fmt(err, errlen, "(error object is a %s value)", luaL_typename(L, -1));
  lua_pop(L, 1);
  return failure;
}
