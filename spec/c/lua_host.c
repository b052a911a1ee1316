/* lua_host.c: a Lua 5.4 interpreter for busted, built with the sanitizers
 * when the build is (make test's sanitized half):
 *
 *   lua_host SCRIPT [ARGS...]   (as `lua5.4 SCRIPT ARGS...`)
 *
 * Stock lua5.4 is not built with AddressSanitizer, so loading the
 * sanitized module into it needs the runtime preloaded (LD_PRELOAD).  A
 * preload is inherited by every program a spec starts: each `sh`, `env`
 * and `timeout` of io.popen then started the runtime too, about 40 ms
 * each, over a thousand times in conformance_spec alone.  This host links
 * the runtime itself, so nothing is preloaded and only our own programs
 * run sanitized.  It does what lua.c does for a script: the global `arg`
 * (arg[0] the script, arg[-1] the interpreter), the script's arguments as
 * `...`, the generational collector, a traceback on error. */
#include <stdio.h>
#include <stdlib.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  luaL_traceback(L, L, msg, 1);
  return 1;
}

static int run(lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = lua_touserdata(L, 2);
  luaL_openlibs(L);
  lua_gc(L, LUA_GCGEN, 0, 0);
  lua_createtable(L, argc - 2, 2);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - 1);
  }
  lua_setglobal(L, "arg");
  lua_pushcfunction(L, traceback);
  if (luaL_loadfile(L, argv[1]) != LUA_OK) return lua_error(L);
  for (int i = 2; i < argc; i++) lua_pushstring(L, argv[i]);
  if (lua_pcall(L, argc - 2, 0, 3) != LUA_OK) return lua_error(L);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s SCRIPT [ARGS...]\n", argv[0]);
    return 2;
  }
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, "%s: cannot create a Lua state\n", argv[0]);
    return 1;
  }
  lua_pushcfunction(L, run);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  int status = lua_pcall(L, 2, 0, 0);
  if (status != LUA_OK) {
    fprintf(stderr, "%s: %s\n", argv[0], lua_tostring(L, -1));
    fflush(stderr);
  }
  lua_close(L);
  return status == LUA_OK ? EXIT_SUCCESS : EXIT_FAILURE;
}
