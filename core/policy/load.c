/* load.c: a policy script run in a new sandboxed Lua state, and what it
 * set read out: the fields (with the line of each, and a warning for each
 * unknown name), its functions as registry references, its options with
 * their overrides applied, and the `info` proxy.  Under protection. */
#include <lauxlib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

static int track_newindex(lua_State *L) {
  /* __newindex on the globals while the chunk runs: note each name's line
   * in the script itself (not in a file it requires: another file's line) */
  lua_Debug ar;
  if (lua_type(L, 2) == LUA_TSTRING && lua_getstack(L, 1, &ar) && lua_getinfo(L, "Sl", &ar) &&
      strcmp(ar.source, lua_tostring(L, lua_upvalueindex(2))) == 0) {
    lua_pushvalue(L, 2);
    lua_pushinteger(L, ar.currentline);
    lua_rawset(L, lua_upvalueindex(1));
  }
  lua_rawset(L, 1);
  return 0;
}

static int line_of(lua_State *L, int lines, const char *name) {
  int line = 0;
  if (!lines) return 0; /* nothing pushed: a returned table has no lines */
  if (lua_getfield(L, lines, name) == LUA_TNUMBER) line = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  return line;
}

/* Reads the value at the top of the stack into f (pops it). */
static void read_field(lua_State *L, lr_field *f, int line) {
  f->type = lua_type(L, -1);
  f->line = line;
  switch (f->type) {
  case LUA_TNUMBER: f->num = lua_tonumber(L, -1); break;
  case LUA_TBOOLEAN: f->boolean = lua_toboolean(L, -1); break;
  case LUA_TSTRING: {
    size_t len;
    const char *str = lua_tolstring(L, -1, &len);
    lr_field_set_string(f, str, len); /* as an override's (schema.c) */
    break;
  }
  default: break;
  }
  lua_pop(L, 1);
}

/* Whether `name` is a field: a top-level one when prefix is "", else one
 * of the table field `prefix` ("backoff." ...). */
static int is_known(const char *name, const char *prefix) {
  char full[128];
  lr_fmt(full, sizeof full, "%s%s", prefix, name);
  int i = lr_field_index(full);
  return i >= 0 && (*prefix || !strchr(lr_fields[i].name, '.'));
}

/* Whether field i is a table whose fields are rows of their own. */
static int has_fields(int i) {
  for (int j = 0; j < F_COUNT; j++)
    if (lr_field_in(j, i)) return 1;
  return 0;
}

/* Warns of each string key of table `t` that no field has; `baseline`
 * (or 0) holds names the sandbox itself put there. */
static void read_table_fields(lua_State *L, lr_load *ld, int parent, int t, int line);

/* A name renamed before 1.0 (schema.c), its value at the top: read in the
 * new name's place unless that is set too, with a warning naming the new
 * one.  Pops the value; 1 when `name` was renamed. */
static int read_renamed(lua_State *L, lr_load *ld, const char *prefix, const char *k, int line) {
  char full[128], note[200], where[1100];
  lr_fmt(full, sizeof full, "%s%s", prefix, k);
  int i = lr_field_renamed(full);
  if (i < 0) return lua_pop(L, 1), 0;
  lr_renamed_note(note, sizeof note, full);
  if (line)
    lr_fmt(where, sizeof where, "%s:%d", ld->chunk_src, line);
  else
    lr_fmt(where, sizeof where, "%s", ld->chunk_src);
  if (ld->fields[i].type != LUA_TNIL) {
    lr_add_warning(ld->warnings, &ld->warning_count, "%s: %s; %s is set too: %s is ignored", where,
                   note, lr_fields[i].name, full);
    return lua_pop(L, 1), 1;
  }
  lr_add_warning(ld->warnings, &ld->warning_count, "%s: %s", where, note);
  if (has_fields(i) && lua_type(L, -1) == LUA_TTABLE)
    read_table_fields(L, ld, i, lua_gettop(L), line);
  read_field(L, &ld->fields[i], line);
  return 1;
}

static void unknown_names(lua_State *L, lr_load *ld, int t, int baseline, int lines,
                          int default_line, const char *prefix) {
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_type(L, -2) != LUA_TSTRING) {
      lua_pop(L, 1);
      continue;
    }
    const char *k = lua_tostring(L, -2);
    if (is_known(k, prefix)) {
      lua_pop(L, 1);
      continue;
    }
    if (read_renamed(L, ld, prefix, k, *prefix ? default_line : line_of(L, lines, k))) continue;
    if (baseline) {
      lua_pushvalue(L, -1);
      int base = lua_rawget(L, baseline) != LUA_TNIL;
      lua_pop(L, 1);
      if (base) continue;
    }
    int line = *prefix ? default_line : line_of(L, lines, k);
    const char *near = lr_closest_field(k, prefix);
    char where[1100], from[160] = "";
    if (line)
      lr_fmt(where, sizeof where, "%s:%d", ld->chunk_src, line);
    else
      lr_fmt(where, sizeof where, "%s", ld->chunk_src);
    if (!*prefix && ld->origins) { /* a name a required file set: say which */
      lua_pushvalue(L, -1);
      if (lua_rawget(L, ld->origins) == LUA_TSTRING)
        lr_fmt(from, sizeof from, " (set by require \"%s\")", lua_tostring(L, -1));
      lua_pop(L, 1);
    }
    lr_add_warning(ld->warnings, &ld->warning_count, "%s: %s%s: unknown name%s%s%s%s", where,
                   prefix, k, near ? ", did you mean " : "", near ? near : "", near ? "?" : "",
                   from);
  }
}

/* The type of the first key of the table at t that is no name, else
 * LUA_TNIL: a positional entry was skipped in silence, and its setting's
 * default taken (schema.c says so). */
static int unnamed_key(lua_State *L, int t) {
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    int type = lua_type(L, -1);
    if (type != LUA_TSTRING) {
      lua_pop(L, 1);
      return type;
    }
  }
  return LUA_TNIL;
}

/* Reads the fields of the table field `parent` (at index t). */
static void read_table_fields(lua_State *L, lr_load *ld, int parent, int t, int line) {
  ld->fields[parent].unnamed = unnamed_key(L, t);
  char prefix[32];
  lr_fmt(prefix, sizeof prefix, "%s.", lr_fields[parent].name);
  size_t plen = strlen(prefix);
  for (int j = 0; j < F_COUNT; j++) {
    if (!lr_field_in(j, parent) || strchr(lr_fields[j].name + plen, '.')) continue;
    lua_pushstring(L, lr_fields[j].name + plen);
    lua_rawget(L, t);
    /* a table in the table (breaker.slow_call): its fields, one level down */
    if (has_fields(j) && lua_type(L, -1) == LUA_TTABLE)
      read_table_fields(L, ld, j, lua_gettop(L), line);
    read_field(L, &ld->fields[j], line);
  }
  unknown_names(L, ld, t, 0, 0, line, prefix);
}

/* What the classifier at registry `ref` is handed: the status alone when
 * it takes fewer than 2 parameters and no `...` (it cannot see the body);
 * "" for the body when its second parameter is named `_`, Lua's name for
 * one that is not used (no body is made); else the body.  Allocates
 * nothing (a registry read, lua_getlocal and lua_getinfo "u"). */
static int bodiless(lua_State *L, int ref) {
  lua_Debug ar;
  if (!ref) return LR_HOOK_BODY;
  if (lua_rawgeti(L, LUA_REGISTRYINDEX, ref) != LUA_TFUNCTION) {
    lua_pop(L, 1);
    return LR_HOOK_BODY;
  }
  const char *second = lua_getlocal(L, NULL, 2); /* a parameter's name, or NULL */
  int unused = second && strcmp(second, "_") == 0;
  if (!lua_getinfo(L, ">u", &ar)) return LR_HOOK_BODY;
  if (ar.nparams < 2 && !ar.isvararg) return LR_HOOK_STATUS_ONLY;
  return unused ? LR_HOOK_BODY_UNUSED : LR_HOOK_BODY;
}

static void function_rule(lua_State *L, int idx, char *rule, size_t size) {
  lua_Debug ar;
  lua_pushvalue(L, idx);
  lua_getinfo(L, ">S", &ar);
  lr_fmt(rule, size, "%s:%d", ar.short_src, ar.linedefined);
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "a, b, c": the names of the options table at opts, in order, pushed.
 * Gathered before the buffer starts: a luaL_Buffer owns the top of the
 * stack, and with lua_next's key above it liblua took the key's slot for
 * its box once the names outgrew its first block ("invalid key to
 * 'next'"). */
static void push_option_names(lua_State *L, int opts) {
  size_t n = 0;
  for (lua_pushnil(L); lua_next(L, opts); lua_pop(L, 1)) n += lua_type(L, -2) == LUA_TSTRING;
  const char **names = lua_newuserdatauv(L, (n ? n : 1) * sizeof *names, 0);
  size_t k = 0; /* the keys' strings live as long as the table holds them */
  for (lua_pushnil(L); lua_next(L, opts); lua_pop(L, 1))
    if (lua_type(L, -2) == LUA_TSTRING && k < n) names[k++] = lua_tostring(L, -2);
  qsort(names, k, sizeof *names, by_name);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (size_t i = 0; i < k; i++) {
    if (i) luaL_addstring(&b, ", ");
    luaL_addstring(&b, names[i]);
  }
  luaL_pushresult(&b);
}

/* options[name] = value, typed by the script's default; raises on an
 * unknown option or a value of the wrong type. */
static void set_option(lua_State *L, int opts, const char *name, const char *value) {
  int t = lua_getfield(L, opts, name);
  lua_pop(L, 1);
  if (t == LUA_TBOOLEAN && (strcmp(value, "true") == 0 || strcmp(value, "false") == 0)) {
    lua_pushboolean(L, value[0] == 't');
  } else if (t == LUA_TNUMBER) {
    double d; /* as every number a host sets (schema.c) */
    if (!lr_decimal(value, &d) || !isfinite(d))
      luaL_error(L, "options.%s: expected a number, got \"%s\"%s", name, value,
                 lr_decimal_note(value));
    lua_pushnumber(L, d);
  } else if (t == LUA_TSTRING) {
    lua_pushstring(L, value);
  } else if (t == LUA_TBOOLEAN) {
    luaL_error(L, "options.%s: expected true or false, got \"%s\"", name, value);
  } else {
    /* name the options there are, so a typo is easy to see */
    push_option_names(L, opts);
    luaL_error(L, "options.%s: %s (the script's options: %s)", name,
               t == LUA_TNIL ? "unknown option" : "only booleans, numbers and strings can be set",
               lua_tostring(L, -1));
  }
  lua_setfield(L, opts, name);
}

/* Makes the globals note the line of each name the chunk sets: leaves
 * 1: the names the sandbox put there (baseline), 2: name -> line,
 * 3: the globals; returns the index of the tracking metatable. */
static int track_globals(lua_State *L, const char *chunkname) {
  lua_newtable(L);
  lua_pushglobaltable(L);
  lua_pushnil(L);
  while (lua_next(L, 2)) {
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_pushboolean(L, 1);
    lua_rawset(L, 1);
  }
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushglobaltable(L); /* 3 */
  lua_newtable(L);        /* the tracker metatable */
  lua_pushvalue(L, 2);
  lua_pushstring(L, chunkname);
  lua_pushcclosure(L, track_newindex, 2);
  lua_setfield(L, -2, "__newindex");
  lua_pushvalue(L, -1);
  lua_setmetatable(L, 3);
  return lua_gettop(L);
}

/* ---- inheritance: a policy that requires another (require "http")
 *
 * While the chunk runs, `require` is wrapped: the required file's
 * settings and hooks become defaults, and whatever the script itself set,
 * before the require or after it, wins.  The wrapper returns what the file
 * set (a table: name -> value) when the file returns nothing, so an
 * inherited hook stays reachable for a wrapper of it. */

enum { UP_REQUIRE = 1, UP_BASELINE, UP_INHERITED, UP_ORIGIN, UP_CACHE };

/* A shallow copy of the table at idx, pushed. */
static void push_copy(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_newtable(L);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, -4);
  }
}

/* Pushes what the script set itself so far: every name of the globals g
 * that the sandbox did not put there and that no require gave as it is. */
static void push_own(lua_State *L, int g) {
  lua_newtable(L);
  lua_pushnil(L);
  while (lua_next(L, g)) {
    int own = lua_type(L, -2) == LUA_TSTRING;
    if (own) {
      lua_pushvalue(L, -2);
      own = lua_rawget(L, lua_upvalueindex(UP_BASELINE)) == LUA_TNIL;
      lua_pushvalue(L, -3);
      lua_rawget(L, lua_upvalueindex(UP_INHERITED));
      own = own && !lua_rawequal(L, -1, -3);
      lua_pop(L, 2);
    }
    if (own) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, -4);
    } else {
      lua_pop(L, 1);
    }
  }
}

/* Notes each global the file `name` changed (g against its copy `before`)
 * as inherited, with its origin unless a nested require named one; pushes
 * the table of them. */
static void note_inherited(lua_State *L, int g, int before, int origin_before, int name) {
  int origin = lua_upvalueindex(UP_ORIGIN);
  lua_newtable(L);
  int set = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, g)) {
    lua_pushvalue(L, -2);
    lua_rawget(L, before);
    int changed = lua_type(L, -3) == LUA_TSTRING && !lua_rawequal(L, -1, -2);
    lua_pop(L, 1);
    if (changed) {
      lua_pushvalue(L, -2);
      lua_pushvalue(L, -2);
      lua_rawset(L, set);
      /* a nested require gave it (and the file kept it): that one's name */
      lua_pushvalue(L, -2);
      lua_rawget(L, lua_upvalueindex(UP_INHERITED));
      int nested = lua_rawequal(L, -1, -2);
      lua_pushvalue(L, -3);
      lua_rawget(L, origin);
      lua_pushvalue(L, -4);
      lua_rawget(L, origin_before);
      nested = nested && !lua_rawequal(L, -1, -2);
      lua_pop(L, 3);
      lua_pushvalue(L, -2);
      lua_pushvalue(L, -2);
      lua_rawset(L, lua_upvalueindex(UP_INHERITED));
      if (!nested) {
        lua_pushvalue(L, -2);
        lua_pushvalue(L, name);
        lua_rawset(L, origin);
      }
    }
    lua_pop(L, 1);
  }
}

/* cache[name] = the value at the top (kept there). */
static void cache_as(lua_State *L, int name) {
  lua_pushvalue(L, name);
  lua_pushvalue(L, -2);
  lua_rawset(L, lua_upvalueindex(UP_CACHE));
}

static int inheriting_require(lua_State *L) {
  const char *mod = luaL_checkstring(L, 1);
  lua_settop(L, 1);
  lua_pushvalue(L, 1);
  int cached = lua_rawget(L, lua_upvalueindex(UP_CACHE));
  if (cached == LUA_TBOOLEAN && !lua_toboolean(L, -1)) /* false: loading */
    return lr_sandbox_error(L, "require: '%s' requires itself (a loop of requires)", mod);
  if (cached != LUA_TNIL) return 1;
  lua_pushboolean(L, 0); /* false: loading, until it returns */
  cache_as(L, 1);
  lua_settop(L, 1);
  lua_pushglobaltable(L);                    /* 2 */
  push_own(L, 2);                            /* 3 */
  push_copy(L, 2);                           /* 4: the globals before */
  push_copy(L, lua_upvalueindex(UP_ORIGIN)); /* 5 */
  lua_pushvalue(L, lua_upvalueindex(UP_REQUIRE));
  lua_pushvalue(L, 1);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) { /* 6: what the file returned */
    lua_pushnil(L);                      /* not loading any more */
    cache_as(L, 1);
    lua_pop(L, 1);
    return lua_error(L); /* the same error, on its way */
  }
  note_inherited(L, 2, 4, 5, 1); /* 7: what it set */
  /* the script's own settings win, and a name is not inherited: it says
   * whose the policy is (logs, the fleet's key) */
  lua_pushliteral(L, "name");
  lua_pushliteral(L, "name");
  lua_rawget(L, 4);
  lua_rawset(L, 2);
  lua_pushnil(L);
  while (lua_next(L, 3)) {
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, 2);
    /* ours, not inherited: a require around this one names this file */
    lua_pushvalue(L, -1);
    lua_pushnil(L);
    lua_rawset(L, lua_upvalueindex(UP_ORIGIN));
    lua_pushvalue(L, -1);
    lua_pushnil(L);
    lua_rawset(L, lua_upvalueindex(UP_INHERITED));
  }
  if (lua_type(L, 6) != LUA_TBOOLEAN) lua_pushvalue(L, 6); /* a module: its table */
  cache_as(L, 1);
  return 1;
}

/* Wraps the global require for the chunk's run; baseline at index 1.
 * Leaves the origin table (name -> the module it came from) and returns
 * its index, and the inherited one (name -> value) below it. */
static int wrap_require(lua_State *L) {
  lua_newtable(L); /* inherited */
  lua_newtable(L); /* origin */
  int origin = lua_gettop(L);
  lua_getglobal(L, "require");
  lua_pushvalue(L, 1);
  lua_pushvalue(L, origin - 1);
  lua_pushvalue(L, origin);
  lua_newtable(L);
  lua_pushcclosure(L, inheriting_require, 5);
  lua_pushliteral(L, "require");
  lua_insert(L, -2);
  lua_pushglobaltable(L);
  lua_insert(L, -3);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  return origin;
}

/* Each top-level field that still holds what a required file gave it:
 * the module it came from, into ld->origin (for `check`). */
static void note_origins(lua_State *L, lr_load *ld, int origin) {
  int top = lua_gettop(L);
  for (int i = 0; i < F_COUNT; i++) {
    const char *name = lr_fields[i].name;
    if (strchr(name, '.')) continue;
    lua_pushstring(L, name);
    lua_rawget(L, origin - 1); /* what a require gave */
    lua_pushglobaltable(L);
    lua_pushstring(L, name);
    lua_rawget(L, -2); /* raw: the script may be strict */
    lua_remove(L, -2);
    if (!lua_isnil(L, -1) && lua_rawequal(L, -1, -2)) {
      lua_pushstring(L, name);
      if (lua_rawget(L, origin) == LUA_TSTRING)
        lr_strlcpy(ld->origin[i], lua_tostring(L, -1), sizeof ld->origin[i]);
    }
    lua_settop(L, top);
  }
}

/* The sandbox's require back in place once the chunk has run. */
static void unwrap_require(lua_State *L) {
  lua_pushglobaltable(L);
  lua_pushliteral(L, "require");
  lua_rawget(L, -2);
  if (lua_tocfunction(L, -1) == inheriting_require && lua_getupvalue(L, -1, UP_REQUIRE)) {
    lua_pushliteral(L, "require");
    lua_insert(L, -2);
    lua_rawset(L, -4);
  }
  lua_pop(L, 2);
}

/* Compiles (text only) and runs the chunk; leaves what it returned. */
static void run_chunk(lua_State *L, lr_load *ld, int tracker) {
  /* a limit reached while compiling has no line yet: the file, then */
  lr_sandbox *sb = lr_sandbox_of(L);
  const char *name = ld->gen->chunkname;
  lr_fmt(sb->where, sizeof sb->where, "%s", name[0] == '@' || name[0] == '=' ? name + 1 : name);
  int status = lr_chunk_load(L, ld->gen->text, ld->gen->text_len, ld->gen->chunkname);
  if (!sb->killed) sb->where[0] = '\0';
  if (status != LUA_OK) {
    ld->syntax_error = status == LUA_ERRSYNTAX;
    ld->io_error = status == LUA_ERRFILE;
    lua_error(L);
  }
  lua_Debug ar;
  lua_pushvalue(L, -1);
  lua_getinfo(L, ">S", &ar);
  lr_strlcpy(ld->chunk_src, ar.short_src, sizeof ld->chunk_src);
  lua_call(L, 0, 1);
  /* Leave a metatable the script set on its globals; drop only ours. */
  if (lua_getmetatable(L, 3)) {
    if (lua_rawequal(L, -1, tracker)) {
      lua_pushnil(L);
      lua_setmetatable(L, 3);
    }
    lua_pop(L, 1);
  }
}

/* Reads every top-level field (and the fields of its table) from the
 * table at src; keeps a reference to each function. */
static void read_fields(lua_State *L, lr_load *ld, int src, int lines) {
  for (int i = 0; i < F_COUNT; i++) {
    if (strchr(lr_fields[i].name, '.')) continue; /* a table's field: below */
    /* raw: the script may have set a metatable on its globals (a strict
     * __index that raises on an undefined name is common) */
    lua_pushstring(L, lr_fields[i].name);
    lua_rawget(L, src);
    int line = line_of(L, lines, lr_fields[i].name);
    if (lua_type(L, -1) == LUA_TFUNCTION) {
      lr_script *s = ld->script;
      char *rule = i == F_IS_TRANSIENT    ? s->rule_is_transient
                   : i == F_IS_SUCCESS    ? s->rule_is_success
                   : i == F_BACKOFF       ? s->rule_backoff
                   : i == F_IS_IDEMPOTENT ? s->rule_is_idempotent
                   : i == F_IS_THROTTLING ? s->rule_is_throttling
                   : i == F_PREPARE       ? s->rule_prepare
                                          : NULL;
      if (rule) function_rule(L, -1, rule, RULE_SIZE);
      lua_pushvalue(L, -1);
      ld->refs[i] = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    if (has_fields(i) && lua_type(L, -1) == LUA_TTABLE)
      read_table_fields(L, ld, i, lua_gettop(L), line);
    read_field(L, &ld->fields[i], line);
  }
}

/* An option renamed a field (options.retry_all_errors, http's and
 * command's own once: schema.c's renamed[]) that the script's options
 * table still holds, its own or inherited: read as the field, with the
 * warning --set options.retry_all_errors gets.  It was left to the
 * options, which nothing reads any more. */
static void read_renamed_options(lua_State *L, lr_load *ld, int src, int lines) {
  lua_pushliteral(L, "options");
  if (lua_rawget(L, src) != LUA_TTABLE) {
    lua_pop(L, 1);
    return;
  }
  int opts = lua_gettop(L), line = line_of(L, lines, "options");
  lua_pushnil(L);
  while (lua_next(L, opts)) {
    if (lua_type(L, -2) == LUA_TSTRING)
      read_renamed(L, ld, "options.", lua_tostring(L, -2), line); /* pops the value */
    else
      lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* The script's own settings, and the overrides of them. */
static void read_options(lua_State *L, lr_load *ld, int src) {
  lua_pushliteral(L, "options");
  lua_rawget(L, src);
  int has_options = lua_type(L, -1) == LUA_TTABLE;
  for (size_t k = 0; k < ld->gen->option_count; k++) {
    const lr_override *o = &ld->gen->options[k];
    if (!has_options) luaL_error(L, "%s: %s declares no options", o->name, ld->chunk_src);
    set_option(L, lua_gettop(L), o->name + 8, o->value);
  }
  ld->script->ref_options = has_options ? luaL_ref(L, LUA_REGISTRYINDEX) : (lua_pop(L, 1), 0);
}

/* info: a read-only proxy (a userdata: no rawset reaches it) whose fields
 * are read from the decision in progress, so an is_transient that ignores
 * it costs nothing. */
static void make_info(lua_State *L, lr_load *ld) {
  lua_newuserdatauv(L, 0, 0);
  lua_createtable(L, 0, 3);
  lua_pushcfunction(L, lr_info_index); /* its script: the sandbox's owner */
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, lr_info_newindex);
  lua_setfield(L, -2, "__newindex");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
  ld->script->ref_info = luaL_ref(L, LUA_REGISTRYINDEX);
}

/* An entry of a returned table with no name ({max_attempts = 3, "pos"})
 * would set nothing, in silence: a load error naming it. */
static void refuse_unnamed(lua_State *L, lr_load *ld, int t) {
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_type(L, -2) == LUA_TSTRING) {
      lua_pop(L, 1);
      continue;
    }
    const char *key = lua_isinteger(L, -2) ? lua_pushfstring(L, "[%I]", lua_tointeger(L, -2))
                                           : lua_pushfstring(L, "a %s key", luaL_typename(L, -2));
    int text = lua_type(L, -2) == LUA_TSTRING;
    const char *value = text ? lr_quote_clip(L, lua_tostring(L, -2)) : luaL_typename(L, -2);
    luaL_error(L,
               "%s: the returned table holds an entry with no name (%s = %s%s%s): a policy's "
               "fields are named (max_attempts = 3)",
               ld->chunk_src, key, text ? "\"" : "a ", value, text ? "\"" : "");
  }
}

static int load_protected(lua_State *L) {
  lr_load *ld = lua_touserdata(L, 1);
  lua_settop(L, 0);
  int tracker = track_globals(L, ld->gen->chunkname);
  int origin = wrap_require(L);
  run_chunk(L, ld, tracker);
  unwrap_require(L);
  note_origins(L, ld, origin);
  ld->origins = origin;
  /* a script sets globals, or returns a table with the same fields */
  int from_table = lua_type(L, -1) == LUA_TTABLE;
  int src = from_table ? lua_gettop(L) : 3;
  int lines = from_table ? 0 : 2;
  if (from_table) refuse_unnamed(L, ld, src);
  read_fields(L, ld, src, lines);
  unknown_names(L, ld, src, from_table ? 0 : 1, lines, 0, "");
  read_renamed_options(L, ld, src, lines);
  read_options(L, ld, src);
  make_info(L, ld);
  lr_lint_trap_globals(L, ld->gen);
  return 0;
}

/* The slots every decision pushes from: info, the cached body, the
 * decision hooks (nil when the script has none). */
static int push_slots(lua_State *L) {
  lr_script *s = lua_touserdata(L, 1);
  lua_settop(L, 0);
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->ref_info);
  lua_pushliteral(L, "");
  if (s->ref_is_transient)
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->ref_is_transient);
  else
    lua_pushnil(L);
  if (s->ref_is_success)
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->ref_is_success);
  else
    lua_pushnil(L);
  lua_pushliteral(L, "");
  return SLOT_BASE - 1;
}

void lr_script_free(lr_script *s) {
  if (!s) return;
  lr_sandbox_free(s->sb);
  free(s);
}

/* The sandbox's question (lr_sandbox_on_cancel): whether the call the
 * script now runs for was cancelled (luaretry_call_cancel, maybe from a
 * signal handler).  The watchdog asks on its thread while it holds the
 * call into the script, so cur_ctx, cur_call and the call they name stay
 * put meanwhile; an atomic load, no lock. */
static int call_cancelled(void *owner) {
  const lr_script *s = owner;
  const luaretry_call *c = s->cur_ctx ? s->cur_ctx->call : s->cur_call;
  return c && luaretry_call_cancelled(c);
}

lr_script *lr_script_new(lr_gen *g, lr_load *ld, luaretry_code *rc, char *err, size_t errlen) {
  lr_script *s = lr_aligned_calloc(sizeof *s); /* a decision's fields: two lines */
  if (!s) {
    *rc = LUARETRY_E_NOMEM;
    lr_fmt(err, errlen, "out of memory");
    return NULL;
  }
  s->gen = g;
  s->ref_headers = s->ref_call = LUA_NOREF;
  s->sb = lr_sandbox_new(&g->limits, g->script_path[0] ? g->script_path : NULL, &g->p->log,
                         lr_sandbox_open_libs);
  if (!s->sb) {
    free(s);
    *rc = LUARETRY_E_NOMEM;
    lr_fmt(err, errlen, "cannot create a Lua state (memory_limit %zu bytes too small?)",
           g->limits.memory);
    return NULL;
  }
  s->sb->owner = s; /* info's __index finds its script through it */
  lr_sandbox_on_cancel(s->sb, call_cancelled);
  ld->gen = g;
  ld->script = s;
  *rc = lr_sandbox_call(s->sb, load_protected, ld, 0, LUARETRY_E_POLICY, err, errlen);
  if (*rc == LUARETRY_E_POLICY && ld->syntax_error) *rc = LUARETRY_E_SYNTAX;
  if (*rc != LUARETRY_OK) {
    lr_script_free(s);
    return NULL;
  }
  s->ref_is_transient = ld->refs[F_IS_TRANSIENT];
  s->ref_is_success = ld->refs[F_IS_SUCCESS];
  s->ref_on_retry = ld->refs[F_ON_RETRY];
  s->ref_is_idempotent = ld->refs[F_IS_IDEMPOTENT];
  s->ref_prepare = ld->refs[F_PREPARE];
  s->ref_run = ld->refs[F_RUN];
  s->ref_backoff = ld->refs[F_BACKOFF];
  s->ref_on_breaker = ld->refs[F_ON_BREAKER];
  s->bodiless_is_success = bodiless(s->sb->L, s->ref_is_success);
  s->bodiless_is_transient = bodiless(s->sb->L, s->ref_is_transient);
  s->ref_is_throttling = ld->refs[F_IS_THROTTLING];
  if (lr_sandbox_call(s->sb, push_slots, s, SLOT_BASE - 1, LUARETRY_E_POLICY, err, errlen) !=
      LUARETRY_OK) {
    *rc = LUARETRY_E_NOMEM;
    lr_script_free(s);
    return NULL;
  }
  s->sb->base = SLOT_BASE;
  lr_sandbox_trim(s->sb); /* what loading freed is not kept for calls that may never come */
  return s;
}
