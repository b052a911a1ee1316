/* sandbox_lib.c: what a script sees, as data: an allow-list of names per
 * library (as Redis keeps its scripts' libraries_allow_list); a state gets
 * fresh tables holding those names and nothing else.  A policy gets the
 * base library without dofile, loadfile and binary chunks, string (with
 * the matcher of lpattern.c and rep of lstring.c, without dump), table
 * (with insert, remove, move and concat of ltable.c), math, utf8,
 * os.time/clock/date, a require that reaches only the script's folder,
 * lua/ and policies/, json on first use, print to the host's log.  The
 * fault server's scripts get the same plus coroutine, and a require that
 * reaches the script's folder and the system's pure-Lua modules (dkjson)
 * instead of lua/ and policies/.
 * pcall, xpcall and the coroutine functions are our own, so that once a
 * limit is hit no script code catches it: neither a pcall nor an xpcall
 * handler.  No coroutines: a script has none.  math.random draws from the
 * call's seeded stream. */
#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "find.h"
#include "lpattern.h"
#include "lstring.h"
#include "ltable.h"
#include "sandbox.h"

/* Debian's lua-dkjson: json.encode / json.decode for scripts */
#ifndef LUARETRY_DKJSON
#define LUARETRY_DKJSON "/usr/share/lua/5.4/dkjson.lua"
#endif

const char *luaretry_lua_version(void) { return LUA_RELEASE; }

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
  size_t len;
  const char *line = lua_tolstring(L, -1, &len);
  if (memchr(line, '\0', len)) { /* the host gets a C string: a NUL would end it early */
    luaL_Buffer e;
    luaL_buffinit(L, &e);
    for (size_t k = 0; k < len; k++)
      if (line[k])
        luaL_addchar(&e, line[k]);
      else
        luaL_addstring(&e, "\\0");
    luaL_pushresult(&e);
  }
  if (sb->log && sb->log->fn) {
    long paused_at = lr_watchdog_tick(); /* the host's log is not the script's time */
    lr_sandbox_pause(sb);
    sb->log->fn(sb->log->ud, lua_tostring(L, -1));
    lr_sandbox_resume_from(sb, paused_at);
  }
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

/* require reaches the folders of its upvalue 2 (the script's own first),
 * nothing else; modules load as text from regular files, cached per state
 * (upvalue 1).  Its errors name the line of the script that required. */
static int safe_require(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  lua_settop(L, 1);
  lua_pushvalue(L, lua_upvalueindex(1)); /* 2: cache */
  if (lua_getfield(L, 2, name) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  if (!valid_module_name(name))
    return lr_sandbox_error(L, "require: '%s' is not a module name", name);
  char rel[512], path[4700];
  lr_fmt(rel, sizeof rel, "%s", name);
  for (char *c = rel; *c; c++)
    if (*c == '.') *c = '/';
  lua_Integer ndirs = luaL_len(L, lua_upvalueindex(2));
  for (lua_Integer i = 1; i <= ndirs; i++) {
    lua_rawgeti(L, lua_upvalueindex(2), i);
    lr_fmt(path, sizeof path, "%s/%s.lua", lua_tostring(L, -1), rel);
    lua_pop(L, 1);
    int missing;
    int status = lr_chunk_load_file(L, path, lr_sandbox_of(L)->limits.memory, &missing);
    if (missing) continue;
    if (status == LUA_ERRFILE) return lr_sandbox_error(L, "require: %s", lua_tostring(L, -1));
    if (status != LUA_OK) return lua_error(L);
    lua_pushstring(L, name);
    lua_call(L, 1, 1);
    if (lua_isnil(L, -1)) {
      lua_pop(L, 1);
      lua_pushboolean(L, 1);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, 2, name);
    return 1;
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  lua_Integer first = lr_sandbox_of(L)->script_dir[0] ? 2 : 1;
  for (lua_Integer i = first; i <= ndirs; i++) {
    luaL_addstring(&b, i == first ? ", " : i == ndirs ? " or " : ", ");
    lua_rawgeti(L, lua_upvalueindex(2), i);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  return lr_sandbox_error(L, "require: module '%s' not found in the script's folder%s", name,
                          lua_tostring(L, -1));
}

/* The deepest nesting of arrays and objects json.decode takes.  dkjson
 * recurses once per level and builds a table per level: 20,000 `[` (40 KB
 * of a server's body) spent the whole memory limit, an error no pcall
 * catches.  Deeper documents are refused the way dkjson refuses bad JSON. */
#define LR_JSON_MAX_DEPTH 256

/* The position (from 1) in s[0..len) where dkjson's decode, started at
 * `from` (from 0), would open level LR_JSON_MAX_DEPTH + 1, or 0.  It walks
 * the text as dkjson does: blanks, a byte order mark and comments between
 * tokens (scanwhite), strings with their escapes (scanstring), brackets;
 * numbers and names hold none of these.  Past a point dkjson rejects, the
 * walk goes on: at worst it refuses a document dkjson would have refused
 * anyway, and it never sees a bracket as quoted that dkjson opens. */
static size_t json_too_deep(const char *s, size_t len, size_t from) {
  size_t depth = 0;
  for (size_t i = from; i < len; i++) {
    char c = s[i];
    if (c == '/' && i + 1 < len && s[i + 1] == '/') {
      for (i += 2; i < len && s[i] != '\n' && s[i] != '\r';) i++;
    } else if (c == '/' && i + 1 < len && s[i + 1] == '*') {
      for (i += 2; i + 1 < len && !(s[i] == '*' && s[i + 1] == '/');) i++;
      if (i + 1 >= len) return 0; /* unterminated: dkjson stops here */
      i++;
    } else if (c == '"') {
      for (i++; i < len && s[i] != '"'; i++)
        if (s[i] == '\\') i++; /* the escaped byte, whatever it is */
    } else if (c == '[' || c == '{') {
      if (++depth > LR_JSON_MAX_DEPTH) return i + 1;
    } else if ((c == ']' || c == '}') && depth > 0) {
      depth--;
    }
  }
  return 0;
}

/* json.decode(str [, pos [, nullval, ...]]): dkjson's (upvalue 1), but a
 * document nested deeper than LR_JSON_MAX_DEPTH is refused before dkjson
 * reads it: nil, the position, and a message, as dkjson says bad JSON. */
static int json_decode(lua_State *L) {
  int n = lua_gettop(L);
  if (lua_type(L, 1) == LUA_TSTRING) {
    size_t len;
    const char *s = lua_tolstring(L, 1, &len);
    lua_Integer init = luaL_optinteger(L, 2, 1); /* as string.find reads it */
    if (init < 0) init = (lua_Integer)len + init + 1;
    if (init < 1) init = 1;
    size_t at = (size_t)init <= len ? json_too_deep(s, len, (size_t)init - 1) : 0;
    if (at) {
      lua_Integer line = 1, col = 1;
      for (size_t i = 0; i + 1 < at; i++) {
        if (s[i] == '\n')
          line++, col = 1;
        else
          col++;
      }
      lua_pushnil(L);
      lua_pushinteger(L, (lua_Integer)at);
      lua_pushfstring(L, "nested deeper than %d levels at line %I, column %I", LR_JSON_MAX_DEPTH,
                      line, col);
      return 3;
    }
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, n, LUA_MULTRET);
  return lua_gettop(L);
}

/* json.X on first use: loads dkjson (pure Lua, text only) into this state
 * and keeps its encode and decode (decode with a nesting bound), so a
 * policy that never touches json pays no memory for it. */
static int json_index(lua_State *L) {
  int status = luaL_loadfilex(L, LUARETRY_DKJSON, "t");
  if (status == LUA_ERRMEM) return lua_error(L); /* out of memory, said as such */
  if (status != LUA_OK)
    return luaL_error(L, "json: %s (is lua-dkjson installed?)", lua_tostring(L, -1));
  lua_call(L, 0, 1);
  if (!lua_istable(L, -1)) return luaL_error(L, "json: %s did not return a table", LUARETRY_DKJSON);
  static const char *const kept[] = { "encode", "decode", "null", NULL };
  for (int i = 0; kept[i]; i++) {
    lua_getfield(L, -1, kept[i]);
    if (strcmp(kept[i], "decode") == 0) lua_pushcclosure(L, json_decode, 1);
    lua_setfield(L, 1, kept[i]);
  }
  lua_pushvalue(L, 2);
  lua_rawget(L, 1);
  return 1;
}

/* ---- protected calls a kill goes through */

static int pcall_done(lua_State *L, int status, lua_KContext extra) {
  lr_sandbox *sb = lr_sandbox_of(L);
  if (status != LUA_OK && status != LUA_YIELD && sb->refused) lr_sandbox_memory_kill(sb);
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
  lua_rotate(L, 3, 2); /* true and f go after the handler */
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
  case 0: lua_pushnumber(L, (double)(x >> 11) * 0x1.0p-53); return 1;
  case 1:
    lo = 1;
    up = luaL_checkinteger(L, 1);
    if (up == 0) { /* random(0): every bit random, as Lua's */
      lua_pushinteger(L, (lua_Integer)x);
      return 1;
    }
    break;
  case 2:
    lo = luaL_checkinteger(L, 1);
    up = luaL_checkinteger(L, 2);
    break;
  default: return luaL_error(L, "wrong number of arguments");
  }
  luaL_argcheck(L, lo <= up, lua_gettop(L), "interval is empty");
  uint64_t v = uniform_to(r, x, (uint64_t)up - (uint64_t)lo);
  lua_pushinteger(L, (lua_Integer)(v + (uint64_t)lo));
  return 1;
}

static int refuse_randomseed(lua_State *L) {
  return luaL_error(L,
                    "math.randomseed: math.random draws from the call's own seeded "
                    "stream (the host's seed, --seed); a script cannot reseed it");
}

/* ---- the state's globals, from the allow-lists */

static const char *const BASE_NAMES[] = { "assert",   "collectgarbage", "error",    "getmetatable",
                                          "ipairs",   "load",           "next",     "pairs",
                                          "pcall",    "print",          "rawequal", "rawget",
                                          "rawlen",   "rawset",         "select",   "setmetatable",
                                          "tonumber", "tostring",       "type",     "warn",
                                          "xpcall",   "_VERSION",       NULL };
/* no dump: text chunks only; find, match, gmatch, gsub are lpattern.c's,
 * rep lstring.c's */
static const char *const STRING_NAMES[] = { "byte",     "char", "find",    "format", "gmatch",
                                            "gsub",     "len",  "lower",   "match",  "pack",
                                            "packsize", "rep",  "reverse", "sub",    "unpack",
                                            "upper",    NULL };
/* insert, remove, move, concat are ltable.c's, sort lsort.c's */
static const char *const TABLE_NAMES[] = { "concat", "insert", "move",   "pack",
                                           "remove", "sort",   "unpack", NULL };
static const char *const MATH_NAMES[] = { "abs",        "acos", "asin", "atan",       "ceil",
                                          "cos",        "deg",  "exp",  "floor",      "fmod",
                                          "huge",       "log",  "max",  "maxinteger", "min",
                                          "mininteger", "modf", "pi",   "rad",        "random",
                                          "randomseed", "sin",  "sqrt", "tan",        "tointeger",
                                          "type",       "ult",  NULL };
static const char *const UTF8_NAMES[] = { "char", "charpattern", "codepoint", "codes",
                                          "len",  "offset",      NULL };
static const char *const OS_NAMES[] = { "clock", "date", "time", NULL };
static const char *const COROUTINE_NAMES[] = { "close",  "create",  "isyieldable",
                                               "resume", "running", "status",
                                               "wrap",   "yield",   NULL };

typedef struct {
  const char *name; /* LUA_GNAME: the base library's globals */
  lua_CFunction open;
  const char *const *allowed;
} allowed_lib;

static const allowed_lib POLICY_LIBS[] = { { LUA_GNAME, luaopen_base, BASE_NAMES },
                                           { LUA_STRLIBNAME, luaopen_string, STRING_NAMES },
                                           { LUA_TABLIBNAME, luaopen_table, TABLE_NAMES },
                                           { LUA_MATHLIBNAME, luaopen_math, MATH_NAMES },
                                           { LUA_UTF8LIBNAME, luaopen_utf8, UTF8_NAMES },
                                           { LUA_OSLIBNAME, luaopen_os, OS_NAMES },
                                           { NULL, NULL, NULL } };

static const allowed_lib FAULTS_LIBS[] = { { LUA_GNAME, luaopen_base, BASE_NAMES },
                                           { LUA_STRLIBNAME, luaopen_string, STRING_NAMES },
                                           { LUA_TABLIBNAME, luaopen_table, TABLE_NAMES },
                                           { LUA_MATHLIBNAME, luaopen_math, MATH_NAMES },
                                           { LUA_UTF8LIBNAME, luaopen_utf8, UTF8_NAMES },
                                           { LUA_OSLIBNAME, luaopen_os, OS_NAMES },
                                           { LUA_COLIBNAME, luaopen_coroutine, COROUTINE_NAMES },
                                           { NULL, NULL, NULL } };

/* Our own functions in place of the library's; `wraps`: the original is
 * the replacement's upvalue. */
typedef struct {
  const char *lib, *name;
  lua_CFunction f;
  int wraps;
} replacement;

static const replacement REPLACED[] = { { LUA_GNAME, "load", safe_load, 1 },
                                        { LUA_GNAME, "setmetatable", safe_setmetatable, 1 },
                                        { LUA_GNAME, "print", safe_print, 0 },
                                        { LUA_GNAME, "pcall", safe_pcall, 0 },
                                        { LUA_GNAME, "xpcall", safe_xpcall, 0 },
                                        { LUA_MATHLIBNAME, "random", safe_random, 0 },
                                        { LUA_MATHLIBNAME, "randomseed", refuse_randomseed, 0 },
                                        { NULL, NULL, NULL, 0 } };

/* ---- the collector before the memory limit, for lauxlib's buffers
 *
 * A function that builds its result in lauxlib's buffer grows the buffer
 * through the allocator itself, where Lua's emergency collection never
 * runs: refused there, it raised "not enough memory" though a collection
 * would have made room (garbage of earlier calls, or of this one).  So
 * when what the call may build (the buffer, up to half again what it
 * holds, and the result's copy) would not fit beside what is counted, and
 * what was allocated since the last collection could be garbage enough to
 * matter, a full collection comes first.  The original is called in this
 * closure's own frame (not through lua_call): its errors keep the script's
 * file and line, and nothing runs twice. */
static size_t len_at(lua_State *L, int i) {
  size_t n = 0;
  if (lua_type(L, i) == LUA_TSTRING) lua_tolstring(L, i, &n);
  return n;
}

static size_t add_sat(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

/* About what the call builds, from its arguments (raw reads only). */
static size_t built_size(lua_State *L, const char *name) {
  int n = lua_gettop(L);
  size_t total = 0;
  if (strcmp(name, "rep") == 0) {
    lua_Integer times = lua_isinteger(L, 2) ? lua_tointeger(L, 2) : 0;
    if (times <= 0) return 0;
    size_t each = add_sat(len_at(L, 1), len_at(L, 3));
    return (size_t)times > SIZE_MAX / (each ? each : 1) ? SIZE_MAX : each * (size_t)times;
  }
  if (strcmp(name, "concat") == 0 && lua_type(L, 1) == LUA_TTABLE) {
    lua_Unsigned len = lua_rawlen(L, 1);
    size_t sep = len_at(L, 2);
    for (lua_Unsigned i = 1; i <= len; i++) {
      lua_rawgeti(L, 1, (lua_Integer)i);
      total = add_sat(total, add_sat(len_at(L, -1), sep + 24));
      lua_pop(L, 1);
    }
    return total;
  }
  for (int i = 1; i <= n; i++) total = add_sat(total, add_sat(len_at(L, i), 24));
  /* gsub: each match may grow by its replacement */
  if (strcmp(name, "gsub") == 0 && len_at(L, 3) > 1)
    total = len_at(L, 1) > SIZE_MAX / len_at(L, 3) ? SIZE_MAX : len_at(L, 1) * len_at(L, 3);
  return total;
}

static int collect_first(lua_State *L) {
  lr_sandbox *sb = lr_sandbox_of(L);
  const char *name = lua_tostring(L, lua_upvalueindex(2));
  size_t need = built_size(L, name);
  size_t room = sb->limits.memory > sb->used ? sb->limits.memory - sb->used : 0;
  size_t since = sb->used > sb->collected_at ? sb->used - sb->collected_at : 0;
  if (need > room / 3 && since > 0) {
    lua_gc(L, LUA_GCCOLLECT);
    sb->collected_at = sb->used;
  }
  return lua_tocfunction(L, lua_upvalueindex(1))(L);
}

/* The functions of the library table at `idx` that build in a buffer. */
static void collect_before_limit(lua_State *L, int idx, const char *const *names) {
  idx = lua_absindex(L, idx);
  for (; *names; names++) {
    /* called in our frame: a C function with no upvalue of its own */
    if (lua_getfield(L, idx, *names) != LUA_TFUNCTION || !lua_tocfunction(L, -1) ||
        lua_getupvalue(L, -1, 1)) {
      lua_settop(L, idx);
      continue;
    }
    lua_pushstring(L, *names);
    lua_pushcclosure(L, collect_first, 2);
    lua_setfield(L, idx, *names);
  }
}

static const char *const STRING_BUFFERED[] = { "rep",  "format", "upper", "lower", "reverse",
                                               "char", "pack",   "gsub",  NULL };
static const char *const TABLE_BUFFERED[] = { "concat", NULL };
static const char *const UTF8_BUFFERED[] = { "char", NULL };

/* Pushes the value the script gets for lib.name, from the opened library
 * at `src`. */
static void push_allowed(lua_State *L, int src, const char *lib, const char *name) {
  lua_getfield(L, src, name);
  for (const replacement *r = REPLACED; r->lib; r++) {
    if (strcmp(r->lib, lib) != 0 || strcmp(r->name, name) != 0) continue;
    if (r->wraps) {
      lua_pushcclosure(L, r->f, 1);
    } else {
      lua_pop(L, 1);
      lua_pushcfunction(L, r->f);
    }
    return;
  }
}

/* A fresh table with the allowed names of the library `lib` opens. */
static void push_library(lua_State *L, const allowed_lib *lib) {
  luaL_requiref(L, lib->name, lib->open, 0);
  int src = lua_gettop(L);
  lua_newtable(L);
  for (const char *const *n = lib->allowed; *n; n++) {
    push_allowed(L, src, lib->name, *n);
    lua_setfield(L, -2, *n);
  }
  lua_remove(L, src);
}

/* The globals: only the allowed names, in a table that replaces the
 * state's global table (so a chunk loaded later sees nothing else). */
static void open_allowed(lua_State *L, const allowed_lib *libs) {
  push_library(L, &libs[0]); /* the base library's names */
  int g = lua_gettop(L);
  lua_pushvalue(L, g);
  lua_rawseti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_pushvalue(L, g);
  lua_setfield(L, g, LUA_GNAME);
  for (const allowed_lib *lib = libs + 1; lib->name; lib++) {
    push_library(L, lib);
    if (strcmp(lib->name, LUA_STRLIBNAME) == 0) {
      lr_pattern_install(L, -1);
      lr_string_install(L, -1);
      collect_before_limit(L, -1, STRING_BUFFERED);
      /* ("x"):rep reaches what the string metatable's __index holds */
      lua_pushliteral(L, "");
      lua_getmetatable(L, -1);
      lua_pushvalue(L, -3);
      lua_setfield(L, -2, "__index");
      lua_pop(L, 2);
    } else if (strcmp(lib->name, LUA_TABLIBNAME) == 0) {
      lr_table_install(L, -1);
      lr_sort_install(L, -1);
      collect_before_limit(L, -1, TABLE_BUFFERED);
    } else if (strcmp(lib->name, LUA_UTF8LIBNAME) == 0) {
      collect_before_limit(L, -1, UTF8_BUFFERED);
    }
    lua_setfield(L, g, lib->name);
  }
  lua_settop(L, g - 1);
}

/* require with its folders: the script's, then `more` (NULL-ended). */
static void set_require(lua_State *L, const char *const *more) {
  lr_sandbox *sb = lr_sandbox_of(L);
  lua_newtable(L); /* the cache */
  lua_newtable(L);
  int n = 0;
  if (sb->script_dir[0]) {
    lua_pushstring(L, sb->script_dir);
    lua_rawseti(L, -2, ++n);
  }
  for (; *more; more++) {
    lua_pushstring(L, *more);
    lua_rawseti(L, -2, ++n);
  }
  lua_pushcclosure(L, safe_require, 2);
  lua_setglobal(L, "require");
}

int lr_sandbox_open_libs(lua_State *L) {
  open_allowed(L, POLICY_LIBS);
  const char *datadir = lr_datadir();
  char lua_dir[4200], pol_dir[4200];
  lr_fmt(lua_dir, sizeof lua_dir, "%s/lua", datadir);
  lr_fmt(pol_dir, sizeof pol_dir, "%s/policies", datadir);
  const char *const dirs[] = { lua_dir, pol_dir, NULL };
  set_require(L, dirs);
  lua_newtable(L);
  lua_newtable(L);
  lua_pushcfunction(L, json_index);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  lua_setglobal(L, "json");
  return 0;
}

int lr_sandbox_open_faults_libs(lua_State *L) {
  open_allowed(L, FAULTS_LIBS);
  static const char *const dirs[] = { "/usr/local/share/lua/5.4", "/usr/share/lua/5.4", NULL };
  set_require(L, dirs);
  return 0;
}
