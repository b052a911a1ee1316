/* policy.c: loading a policy script, validating every field, and the calls
 * into it on each decision (is_success, is_transient, backoff, on_retry).
 * Everything that touches Lua runs under protection (lr_sandbox_call). */
#include <errno.h>
#include <lauxlib.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "sandbox.h"

#define DEFAULT_MEMORY_LIMIT ((size_t)8 << 20)
#define DEFAULT_INSTRUCTION_LIMIT 5000000L
#define DEFAULT_BODY_LIMIT ((size_t)64 << 10)
#define DEFAULT_MAX_RETRY_AFTER 300.0
#define MAX_WARNINGS 64
#define MAX_OVERRIDES 64

/* ---- the fields a script may set */

enum kind {
  K_STRING, K_COUNT, K_SECONDS, K_SECONDS0, K_BOOL, K_BYTES, K_FUNCTION,
  K_BACKOFF, K_KIND, K_JITTER, K_MULTIPLIER, K_GUARD, K_HOST, K_OPTIONS
};

enum {
  F_NAME, F_MAX_ATTEMPTS, F_DEADLINE, F_ATTEMPT_TIMEOUT, F_RETRY_AFTER,
  F_MAX_RETRY_AFTER, F_BODY_LIMIT, F_BACKOFF, F_IS_TRANSIENT, F_IS_SUCCESS,
  F_IS_IDEMPOTENT, F_PREPARE, F_ON_RETRY, F_RUN, F_BUDGET, F_BREAKER, F_OPTIONS,
  F_INSTRUCTION_LIMIT, F_MEMORY_LIMIT,
  F_B_KIND, F_B_INITIAL, F_B_MULTIPLIER, F_B_MAX, F_B_STEP, F_B_JITTER,
  F_B_JITTER_MAX, F_B_CAP_JITTER,
  F_COUNT
};
#define F_FIRST_BACKOFF F_B_KIND

static const struct { const char *name; enum kind kind; } FIELDS[F_COUNT] = {
  [F_NAME] = { "name", K_STRING },
  [F_MAX_ATTEMPTS] = { "max_attempts", K_COUNT },
  [F_DEADLINE] = { "deadline", K_SECONDS },
  [F_ATTEMPT_TIMEOUT] = { "attempt_timeout", K_SECONDS },
  [F_RETRY_AFTER] = { "retry_after", K_BOOL },
  [F_MAX_RETRY_AFTER] = { "max_retry_after", K_SECONDS0 },
  [F_BODY_LIMIT] = { "body_limit", K_BYTES },
  [F_BACKOFF] = { "backoff", K_BACKOFF },
  [F_IS_TRANSIENT] = { "is_transient", K_FUNCTION },
  [F_IS_SUCCESS] = { "is_success", K_FUNCTION },
  [F_IS_IDEMPOTENT] = { "is_idempotent", K_FUNCTION },
  [F_PREPARE] = { "prepare", K_FUNCTION },
  [F_ON_RETRY] = { "on_retry", K_FUNCTION },
  [F_RUN] = { "run", K_FUNCTION },
  [F_BUDGET] = { "budget", K_GUARD },
  [F_BREAKER] = { "breaker", K_GUARD },
  [F_OPTIONS] = { "options", K_OPTIONS },
  [F_INSTRUCTION_LIMIT] = { "instruction_limit", K_HOST },
  [F_MEMORY_LIMIT] = { "memory_limit", K_HOST },
  [F_B_KIND] = { "backoff.kind", K_KIND },
  [F_B_INITIAL] = { "backoff.initial", K_SECONDS0 },
  [F_B_MULTIPLIER] = { "backoff.multiplier", K_MULTIPLIER },
  [F_B_MAX] = { "backoff.max", K_SECONDS },
  [F_B_STEP] = { "backoff.step", K_SECONDS0 },
  [F_B_JITTER] = { "backoff.jitter", K_JITTER },
  [F_B_JITTER_MAX] = { "backoff.jitter_max", K_SECONDS0 },
  [F_B_CAP_JITTER] = { "backoff.cap_jitter", K_BOOL },
};

static const char *const KIND_NAMES[] = { "exponential", "constant", "linear", NULL };
static const char *const JITTER_NAMES[] = { "none", "additive", "full", "equal",
                                            "decorrelated", NULL };

/* What the script (or an override) said of a field, before validation. */
typedef struct {
  int type;          /* a LUA_T* constant; LUA_TNIL when unset */
  double num;
  int boolean;
  char str[64];
  int line;          /* 0 when unknown */
  int from_set;      /* came from luaretry_policy_set */
} lr_field;

typedef struct { char name[48]; char value[64]; } lr_override;

struct luaretry_policy {
  lr_sandbox *sb;
  lr_rules rules;
  luaretry_tuning tuning;
  char name[128];
  char source[1024];
  lr_field fields[F_COUNT];        /* as the script set them */
  int ref_is_transient, ref_is_success, ref_on_retry, ref_backoff, ref_info;
  int ref_is_idempotent, ref_prepare, ref_options, ref_run;
  const char *cur_option_name, *cur_option_value;
  char rule_is_idempotent[1100];
  /* prepare()'s request, copied out of Lua */
  char *prep_method, *prep_url, *prep_body;
  size_t prep_body_len, prep_header_count;
  luaretry_header *prep_headers;
  const luaretry_request *cur_request;
  int cur_attempt;
  int ref_headers;
  char rule_is_transient[1100], rule_is_success[1100], rule_backoff[1100];
  char *warnings[MAX_WARNINGS];     /* load warnings, then validation's */
  size_t warning_count;
  char *load_warnings[MAX_WARNINGS]; /* unknown names, found at load */
  size_t load_warning_count;
  lr_override overrides[MAX_OVERRIDES];
  size_t override_count;
  long instruction_limit;
  size_t memory_limit;
  luaretry_classify_fn host_classify;
  void *host_ud;
  luaretry_log_fn log;
  void *log_ud;
  char errmsg[4096];
  char hook_error[512];
  /* the decision in progress, read by info's __index */
  const luaretry_outcome *cur;
  const lr_attempt_ctx *cur_ctx;
  const luaretry_decision *cur_decision;
  unsigned generation, headers_generation;
  int cur_fn;
  long backoff_n;
  double backoff_previous;
};

/* ---- messages */

static void add_warning(char **list, size_t *count, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void add_warning(char **list, size_t *count, const char *fmt, ...) {
  if (*count >= MAX_WARNINGS) return;
  char buf[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  char *copy = strdup(buf);
  if (copy) list[(*count)++] = copy;
}

static void free_prepared(luaretry_policy *p);

static void free_warnings(char **list, size_t *count) {
  for (size_t i = 0; i < *count; i++) free(list[i]);
  *count = 0;
}

/* Appends a line to an error text. */
static void add_error(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void add_error(char *buf, size_t size, const char *fmt, ...) {
  size_t len = strlen(buf);
  if (len + 2 >= size) return;
  if (len) buf[len++] = '\n', buf[len] = '\0';
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + len, size - len, fmt, ap);
  va_end(ap);
}

static size_t edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b), row[64];
  if (la >= 63 || lb >= 63) return 99;
  for (size_t j = 0; j <= lb; j++) row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j];
      size_t best = diag + (a[i - 1] != b[j - 1]);
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      if (up + 1 < best) best = up + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[lb];
}

/* The known name closest to `name` (within `prefix`), or NULL. */
static const char *closest_field(const char *name, const char *prefix) {
  const char *best = NULL;
  size_t best_d = 3;
  size_t plen = strlen(prefix);
  for (int i = 0; i < F_COUNT; i++) {
    const char *f = FIELDS[i].name;
    if (strncmp(f, prefix, plen) != 0 || (!plen && strchr(f, '.'))) continue;
    size_t d = edit_distance(name, f + plen);
    if (d < best_d && d * 3 <= strlen(f + plen) + 1) best = f, best_d = d;
  }
  return best;
}

static int field_index(const char *name) {
  for (int i = 0; i < F_COUNT; i++)
    if (strcmp(FIELDS[i].name, name) == 0) return i;
  return -1;
}

/* ---- loading, under protection */

typedef struct {
  luaretry_policy *p;
  lr_sandbox *sb;
  const char *path;        /* NULL for a string */
  const char *chunkname;
  const char *source;
  lr_field fields[F_COUNT];
  int refs[F_COUNT];
  char *warnings[MAX_WARNINGS];
  size_t warning_count;
  char chunk_src[1024];    /* short_src, for messages */
  /* "file:line" of each hook: its own file, which a require may make
   * another than the script's */
  char rule_is_transient[1100], rule_is_success[1100], rule_backoff[1100],
      rule_is_idempotent[1100];
  int ref_info, ref_options;
  int syntax_error;
  int io_error;             /* the file opened but cannot be read */
} lr_load;

static int track_newindex(lua_State *L) {
  /* __newindex on the globals while the chunk runs: note each name's line */
  lua_Debug ar;
  if (lua_type(L, 2) == LUA_TSTRING && lua_getstack(L, 1, &ar) &&
      lua_getinfo(L, "l", &ar)) {
    lua_pushvalue(L, 2);
    lua_pushinteger(L, ar.currentline);
    lua_rawset(L, lua_upvalueindex(1));
  }
  lua_rawset(L, 1);
  return 0;
}

static int line_of(lua_State *L, int lines, const char *name) {
  int line = 0;
  if (!lines) return 0;  /* nothing pushed: a returned table has no lines */
  if (lua_getfield(L, lines, name) == LUA_TNUMBER)
    line = (int)lua_tointeger(L, -1);
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
  case LUA_TSTRING: lr_strlcpy(f->str, lua_tostring(L, -1), sizeof f->str); break;
  default: break;
  }
  lua_pop(L, 1);
}

static int is_known(const char *name, int backoff) {
  for (int i = 0; i < F_COUNT; i++) {
    const char *f = FIELDS[i].name;
    if (backoff ? (strncmp(f, "backoff.", 8) == 0 && strcmp(f + 8, name) == 0)
                : (i < F_FIRST_BACKOFF && strcmp(f, name) == 0))
      return 1;
  }
  return 0;
}

/* Warns of each string key of table `t` that no field has; `baseline`
 * (or 0) holds names the sandbox itself put there. */
static void unknown_names(lua_State *L, lr_load *ld, int t, int baseline,
                          int lines, int default_line, int backoff) {
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING) continue;
    const char *k = lua_tostring(L, -1);
    if (is_known(k, backoff)) continue;
    if (baseline) {
      lua_pushvalue(L, -1);
      int base = lua_rawget(L, baseline) != LUA_TNIL;
      lua_pop(L, 1);
      if (base) continue;
    }
    int line = backoff ? default_line : line_of(L, lines, k);
    const char *near = closest_field(k, backoff ? "backoff." : "");
    char where[1100];
    if (line) lr_fmt(where, sizeof where, "%s:%d", ld->chunk_src, line);
    else lr_fmt(where, sizeof where, "%s", ld->chunk_src);
    add_warning(ld->warnings, &ld->warning_count,
                "%s: %s%s: unknown name%s%s%s", where, backoff ? "backoff." : "",
                k, near ? ", did you mean " : "", near ? near : "",
                near ? "?" : "");
  }
}

static void function_rule(lua_State *L, int idx, char *rule, size_t size) {
  lua_Debug ar;
  lua_pushvalue(L, idx);
  lua_getinfo(L, ">S", &ar);
  lr_fmt(rule, size, "%s:%d", ar.short_src, ar.linedefined);
}

static int info_index(lua_State *L);

/* options[name] = value, typed by the script's default; raises on an
 * unknown option or a value of the wrong type. */
static void set_option(lua_State *L, int opts, const char *name, const char *value) {
  int t = lua_getfield(L, opts, name);
  lua_pop(L, 1);
  if (t == LUA_TBOOLEAN && (strcmp(value, "true") == 0 || strcmp(value, "false") == 0)) {
    lua_pushboolean(L, value[0] == 't');
  } else if (t == LUA_TNUMBER) {
    char *end;
    double d = strtod(value, &end);
    if (end == value || *end || !isfinite(d))
      luaL_error(L, "--set options.%s: expected a number, got \"%s\"", name, value);
    lua_pushnumber(L, d);
  } else if (t == LUA_TSTRING) {
    lua_pushstring(L, value);
  } else if (t == LUA_TBOOLEAN) {
    luaL_error(L, "--set options.%s: expected true or false, got \"%s\"", name, value);
  } else {
    /* name the options there are, so a typo is easy to see */
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    lua_pushnil(L);
    while (lua_next(L, opts)) {
      lua_pop(L, 1);
      if (lua_type(L, -1) != LUA_TSTRING) continue;
      if (luaL_bufflen(&b)) luaL_addstring(&b, ", ");
      lua_pushvalue(L, -1);
      luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    luaL_error(L, "--set options.%s: %s (the script's options: %s)", name,
               t == LUA_TNIL ? "unknown option" : "only booleans, numbers and strings can be set",
               lua_tostring(L, -1));
  }
  lua_setfield(L, opts, name);
}

static int set_option_protected(lua_State *L) {
  luaretry_policy *p = lua_touserdata(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, p->ref_options);
  set_option(L, lua_gettop(L), p->cur_option_name, p->cur_option_value);
  return 0;
}

static int load_protected(lua_State *L) {
  lr_load *ld = lua_touserdata(L, 1);
  lua_settop(L, 0);
  /* 1: baseline names, 2: lines */
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
  lua_pushglobaltable(L);                  /* 3 */
  lua_newtable(L);                         /* the tracker metatable */
  lua_pushvalue(L, 2);
  lua_pushcclosure(L, track_newindex, 1);
  lua_setfield(L, -2, "__newindex");
  lua_pushvalue(L, -1);
  int tracker = lua_gettop(L);
  lua_setmetatable(L, 3);

  int status = ld->path ? luaL_loadfilex(L, ld->path, "t")
                        : luaL_loadbufferx(L, ld->source, strlen(ld->source),
                                           ld->chunkname, "t");
  if (status != LUA_OK) {
    ld->syntax_error = status == LUA_ERRSYNTAX;
    ld->io_error = status == LUA_ERRFILE;
    return lua_error(L);
  }
  lua_Debug ar;
  lua_pushvalue(L, -1);
  lua_getinfo(L, ">S", &ar);
  lr_strlcpy(ld->chunk_src, ar.short_src, sizeof ld->chunk_src);
  lua_call(L, 0, 1);                       /* 5: what the chunk returned */
  /* Leave a metatable the script set on its globals; drop only ours. */
  if (lua_getmetatable(L, 3)) {
    if (lua_rawequal(L, -1, tracker)) {
      lua_pushnil(L);
      lua_setmetatable(L, 3);
    }
    lua_pop(L, 1);
  }
  int from_table = lua_type(L, -1) == LUA_TTABLE;
  int src = from_table ? lua_gettop(L) : 3;
  int lines = from_table ? 0 : 2;

  for (int i = 0; i < F_FIRST_BACKOFF; i++) {
    lua_getfield(L, src, FIELDS[i].name);  /* no metatable on either: raw */
    int line = line_of(L, lines, FIELDS[i].name);
    if (lua_type(L, -1) == LUA_TFUNCTION) {
      char *rule = i == F_IS_TRANSIENT ? ld->rule_is_transient
                 : i == F_IS_SUCCESS ? ld->rule_is_success
                 : i == F_BACKOFF ? ld->rule_backoff
                 : i == F_IS_IDEMPOTENT ? ld->rule_is_idempotent : NULL;
      if (rule) function_rule(L, -1, rule, sizeof ld->rule_is_transient);
      lua_pushvalue(L, -1);
      ld->refs[i] = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    if (i == F_BACKOFF && lua_type(L, -1) == LUA_TTABLE) {
      int bt = lua_gettop(L);
      for (int j = F_FIRST_BACKOFF; j < F_COUNT; j++) {
        lua_pushstring(L, FIELDS[j].name + 8);
        lua_rawget(L, bt);
        read_field(L, &ld->fields[j], line);
      }
      unknown_names(L, ld, bt, 0, 0, line, 1);
    }
    read_field(L, &ld->fields[i], line);
  }
  unknown_names(L, ld, src, from_table ? 0 : 1, lines, 0, 0);

  /* The script's own settings, and the overrides of them. */
  lua_getfield(L, src, "options");
  int has_options = lua_type(L, -1) == LUA_TTABLE;
  for (size_t k = 0; k < ld->p->override_count; k++) {
    const lr_override *o = &ld->p->overrides[k];
    if (strncmp(o->name, "options.", 8) != 0) continue;
    if (!has_options)
      return luaL_error(L, "--set %s: %s declares no options", o->name, ld->chunk_src);
    set_option(L, lua_gettop(L), o->name + 8, o->value);
  }
  ld->ref_options = has_options ? luaL_ref(L, LUA_REGISTRYINDEX) : (lua_pop(L, 1), 0);

  /* info: a read-only proxy whose fields are read from the decision in
   * progress, so an is_transient that ignores it costs nothing. */
  lua_newtable(L);
  lua_newtable(L);
  lua_pushlightuserdata(L, ld->p);
  lua_pushcclosure(L, info_index, 1);
  lua_setfield(L, -2, "__index");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
  ld->ref_info = luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

/* ---- validation, in plain C */

static const char *type_name(int t) {
  switch (t) {
  case LUA_TNIL: return "nil";
  case LUA_TNUMBER: return "number";
  case LUA_TBOOLEAN: return "boolean";
  case LUA_TSTRING: return "string";
  case LUA_TTABLE: return "table";
  case LUA_TFUNCTION: return "function";
  default: return "value of another type";
  }
}

static void describe(const lr_field *f, char *buf, size_t size) {
  if (f->type == LUA_TNUMBER) lr_fmt(buf, size, "%g", f->num);
  else if (f->type == LUA_TSTRING) lr_fmt(buf, size, "\"%s\"", f->str);
  else if (f->type == LUA_TBOOLEAN) lr_fmt(buf, size, "%s", f->boolean ? "true" : "false");
  else lr_fmt(buf, size, "a %s", type_name(f->type));
}

typedef struct {
  luaretry_policy *p;
  const char *chunk;
  lr_field *fields;
  char *errors;
  size_t errors_size;
  char **warnings;
  size_t *warning_count;
} lr_check;

static void where(const lr_check *ck, int i, char *buf, size_t size) {
  const lr_field *f = &ck->fields[i];
  if (f->from_set) lr_fmt(buf, size, "--set %s", FIELDS[i].name);
  else if (f->line) lr_fmt(buf, size, "%s:%d: %s", ck->chunk, f->line, FIELDS[i].name);
  else lr_fmt(buf, size, "%s: %s", ck->chunk, FIELDS[i].name);
}

static void bad(lr_check *ck, int i, const char *expected) {
  char w[1200], got[96];
  where(ck, i, w, sizeof w);
  describe(&ck->fields[i], got, sizeof got);
  add_error(ck->errors, ck->errors_size, "%s: expected %s, got %s", w, expected, got);
}

static int enum_index(const char *const *names, const char *s) {
  for (int i = 0; names[i]; i++)
    if (strcmp(names[i], s) == 0) return i;
  return -1;
}

/* Checks field i against its kind; 1 when set and valid, 0 when unset,
 * -1 when invalid (reported). */
static int check_field(lr_check *ck, int i) {
  lr_field *f = &ck->fields[i];
  if (f->type == LUA_TNIL) return 0;
  int num = f->type == LUA_TNUMBER;
  switch (FIELDS[i].kind) {
  case K_STRING:
    if (f->type == LUA_TSTRING) return 1;
    bad(ck, i, "a string");
    return -1;
  case K_COUNT:
    if (num && isfinite(f->num) && f->num >= 1 && f->num <= 1e9 && f->num == floor(f->num))
      return 1;
    bad(ck, i, "a whole number from 1 to 1e9");
    return -1;
  case K_BYTES:
    if (num && isfinite(f->num) && f->num >= 0 && f->num <= (double)(1 << 30) &&
        f->num == floor(f->num))
      return 1;
    bad(ck, i, "a whole number of bytes from 0 to 2^30");
    return -1;
  case K_SECONDS:
    if (num && isfinite(f->num) && f->num > 0) return 1;
    bad(ck, i, "a finite number of seconds above 0");
    return -1;
  case K_SECONDS0:
    if (num && isfinite(f->num) && f->num >= 0) return 1;
    bad(ck, i, "a finite number of seconds, 0 or more");
    return -1;
  case K_MULTIPLIER:
    if (num && isfinite(f->num) && f->num >= 0) return 1;
    bad(ck, i, "a finite number, 0 or more");
    return -1;
  case K_BOOL:
    if (f->type == LUA_TBOOLEAN) return 1;
    bad(ck, i, "true or false");
    return -1;
  case K_FUNCTION:
    if (f->type == LUA_TFUNCTION) return 1;
    bad(ck, i, "a function");
    return -1;
  case K_BACKOFF:
    if (f->type == LUA_TTABLE || f->type == LUA_TFUNCTION) return 1;
    bad(ck, i, "a table or a function backoff(n, previous)");
    return -1;
  case K_KIND:
    if (f->type == LUA_TSTRING && enum_index(KIND_NAMES, f->str) >= 0) return 1;
    bad(ck, i, "\"exponential\", \"constant\" or \"linear\"");
    return -1;
  case K_JITTER:
    if (f->type == LUA_TSTRING && enum_index(JITTER_NAMES, f->str) >= 0) return 1;
    bad(ck, i, "\"none\", \"additive\", \"full\", \"equal\" or \"decorrelated\"");
    return -1;
  case K_OPTIONS:
    if (f->type == LUA_TTABLE) return 1;
    bad(ck, i, "a table of the script's own settings");
    return -1;
  case K_GUARD: {
    char w[1200];
    where(ck, i, w, sizeof w);
    add_error(ck->errors, ck->errors_size,
              "%s: not supported by this version of luaretry (refused rather "
              "than ignored)", w);
    return -1;
  }
  case K_HOST: {
    char w[1200];
    where(ck, i, w, sizeof w);
    add_error(ck->errors, ck->errors_size,
              "%s: a sandbox limit is set by the host (luaretry_policy_set, "
              "--set), not by the script", w);
    return -1;
  }
  }
  return -1;
}

static void warn_at(lr_check *ck, int i, const char *what) {
  char w[1200];
  where(ck, i, w, sizeof w);
  add_warning(ck->warnings, ck->warning_count, "%s: %s", w, what);
}

/* Validates fields into rules and tuning; 0 when valid. */
static int validate(lr_check *ck, lr_rules *r, luaretry_tuning *t) {
  lr_field *f = ck->fields;
  int ok[F_COUNT];
  for (int i = 0; i < F_COUNT; i++) ok[i] = check_field(ck, i);
  int script_backoff = f[F_BACKOFF].type == LUA_TFUNCTION;

  memset(r, 0, sizeof *r);
  r->max_attempts = ok[F_MAX_ATTEMPTS] > 0 ? (long)f[F_MAX_ATTEMPTS].num : 0;
  r->deadline = ok[F_DEADLINE] > 0 ? f[F_DEADLINE].num : 0;
  r->attempt_timeout = ok[F_ATTEMPT_TIMEOUT] > 0 ? f[F_ATTEMPT_TIMEOUT].num : 0;
  r->retry_after = ok[F_RETRY_AFTER] > 0 ? f[F_RETRY_AFTER].boolean : 1;
  r->max_retry_after = ok[F_MAX_RETRY_AFTER] > 0 ? f[F_MAX_RETRY_AFTER].num
                                                 : DEFAULT_MAX_RETRY_AFTER;
  if (ok[F_MAX_ATTEMPTS] == 0 && ok[F_DEADLINE] == 0 &&
      f[F_MAX_ATTEMPTS].type == LUA_TNIL && f[F_DEADLINE].type == LUA_TNIL)
    add_error(ck->errors, ck->errors_size,
              "%s: neither max_attempts nor deadline is set: the policy could "
              "retry forever", ck->chunk);

  lr_backoff *b = &r->backoff;
  b->kind = ok[F_B_KIND] > 0 ? (luaretry_backoff_kind)enum_index(KIND_NAMES, f[F_B_KIND].str)
                             : LUARETRY_BACKOFF_EXPONENTIAL;
  b->initial = ok[F_B_INITIAL] > 0 ? f[F_B_INITIAL].num : 1;
  b->multiplier = ok[F_B_MULTIPLIER] > 0 ? f[F_B_MULTIPLIER].num : 2;
  b->step = ok[F_B_STEP] > 0 ? f[F_B_STEP].num : b->initial;
  b->jitter = ok[F_B_JITTER] > 0 ? (luaretry_jitter)enum_index(JITTER_NAMES, f[F_B_JITTER].str)
                                 : LUARETRY_JITTER_ADDITIVE;
  b->jitter_max = ok[F_B_JITTER_MAX] > 0 ? f[F_B_JITTER_MAX].num : 1;
  b->cap_jitter = ok[F_B_CAP_JITTER] > 0 ? f[F_B_CAP_JITTER].boolean : 0;
  /* Without an explicit max the cap is 32 s, or initial when larger. */
  b->max = ok[F_B_MAX] > 0 ? f[F_B_MAX].num : (b->initial > 32 ? b->initial : 32);

  if (script_backoff) {
    for (int i = F_FIRST_BACKOFF; i < F_COUNT; i++)
      if (f[i].type != LUA_TNIL) {
        char w[1200];
        where(ck, i, w, sizeof w);
        add_error(ck->errors, ck->errors_size,
                  "%s: backoff is a function in this script; its fields cannot be set", w);
      }
    memset(b, 0, sizeof *b);
    b->kind = LUARETRY_BACKOFF_SCRIPT;
  } else {
    if (ok[F_B_MAX] > 0 && ok[F_B_INITIAL] >= 0 && b->max < b->initial) {
      char w[1200];
      where(ck, F_B_MAX, w, sizeof w);
      add_error(ck->errors, ck->errors_size,
                "%s: %g is below backoff.initial (%g)", w, b->max, b->initial);
    }
    if (b->kind == LUARETRY_BACKOFF_EXPONENTIAL && b->multiplier < 1 &&
        ok[F_B_MULTIPLIER] > 0) {
      warn_at(ck, F_B_MULTIPLIER, "below 1 would shrink the waits; clamped to 1 "
              "(a backoff function can return any schedule)");
      b->multiplier = 1;
    }
    if (b->jitter == LUARETRY_JITTER_DECORRELATED && b->initial <= 0)
      add_error(ck->errors, ck->errors_size,
                "%s: backoff.initial: decorrelated jitter needs initial above 0",
                ck->chunk);
    /* "no effect" is news only when the script itself says both; an
     * override that changes kind or jitter means it. */
    int kind_set = f[F_B_KIND].from_set, jitter_set = f[F_B_JITTER].from_set;
    if (ok[F_B_MULTIPLIER] > 0 && b->kind != LUARETRY_BACKOFF_EXPONENTIAL && !kind_set)
      warn_at(ck, F_B_MULTIPLIER, "has no effect unless kind is \"exponential\"");
    if (ok[F_B_STEP] > 0 && b->kind != LUARETRY_BACKOFF_LINEAR && !kind_set)
      warn_at(ck, F_B_STEP, "has no effect unless kind is \"linear\"");
    /* jitter_max also spreads a server's Retry-After, for every kind but none */
    if (ok[F_B_JITTER_MAX] > 0 && b->jitter == LUARETRY_JITTER_NONE && !jitter_set)
      warn_at(ck, F_B_JITTER_MAX, "has no effect when jitter is \"none\"");
    if (ok[F_B_CAP_JITTER] > 0 && b->jitter != LUARETRY_JITTER_ADDITIVE && !jitter_set)
      warn_at(ck, F_B_CAP_JITTER, "has no effect unless jitter is \"additive\"");
  }

  lr_backoff_prepare(b);
  t->max_attempts = r->max_attempts;
  t->deadline = r->deadline;
  t->attempt_timeout = r->attempt_timeout;
  t->retry_after = r->retry_after;
  t->max_retry_after = r->max_retry_after;
  t->body_limit = ok[F_BODY_LIMIT] > 0 ? (size_t)f[F_BODY_LIMIT].num : DEFAULT_BODY_LIMIT;
  t->kind = b->kind;
  t->initial = b->initial;
  t->multiplier = b->multiplier;
  t->max = b->max;
  t->step = b->step;
  t->jitter = b->jitter;
  t->jitter_max = b->jitter_max;
  t->cap_jitter = b->cap_jitter;
  return ck->errors[0] != '\0';
}

/* Applies the stored overrides over a copy of the script's fields. */
static int apply_overrides(luaretry_policy *p, lr_field *fields, char *errors,
                           size_t size) {
  for (size_t k = 0; k < p->override_count; k++) {
    const lr_override *o = &p->overrides[k];
    int i = field_index(o->name);
    if (i < 0) continue;  /* options.NAME: applied in the script's state */
    lr_field *f = &fields[i];
    memset(f, 0, sizeof *f);
    f->from_set = 1;
    const char *v = o->value;
    enum kind kind = FIELDS[i].kind;
    char *end;
    /* "none" unsets a value, except where it is a value: jitter = "none" */
    if (kind != K_JITTER && (strcmp(v, "none") == 0 || strcmp(v, "nil") == 0)) {
      f->type = LUA_TNIL;
    } else if (kind == K_BOOL && (strcmp(v, "true") == 0 || strcmp(v, "false") == 0)) {
      f->type = LUA_TBOOLEAN;
      f->boolean = v[0] == 't';
    } else if (kind != K_STRING && kind != K_KIND && kind != K_JITTER &&
               (f->num = strtod(v, &end), end != v && *end == '\0')) {
      f->type = LUA_TNUMBER;
    } else {
      f->type = LUA_TSTRING;
      lr_strlcpy(f->str, v, sizeof f->str);
    }
    if (i == F_BACKOFF || kind == K_FUNCTION) {
      add_error(errors, size, "--set %s: functions and tables can only be set "
                "in the script", o->name);
      return -1;
    }
  }
  return 0;
}

/* ---- the public side */

luaretry_code luaretry_policy_new(luaretry_policy **out) {
  if (!out) return LUARETRY_E_ARG;
  luaretry_policy *p = calloc(1, sizeof *p);
  *out = p;
  if (!p) return LUARETRY_E_NOMEM;
  p->instruction_limit = DEFAULT_INSTRUCTION_LIMIT;
  p->memory_limit = DEFAULT_MEMORY_LIMIT;
  return LUARETRY_OK;
}

void luaretry_policy_free(luaretry_policy *p) {
  if (!p) return;
  lr_sandbox_free(p->sb);
  free_warnings(p->warnings, &p->warning_count);
  free_warnings(p->load_warnings, &p->load_warning_count);
  free_prepared(p);
  free(p);
}

const char *luaretry_policy_errmsg(const luaretry_policy *p) {
  return p ? p->errmsg : "no policy";
}

size_t luaretry_policy_warning_count(const luaretry_policy *p) {
  return p ? p->warning_count : 0;
}

const char *luaretry_policy_warning(const luaretry_policy *p, size_t i) {
  return p && i < p->warning_count ? p->warnings[i] : NULL;
}

size_t luaretry_policy_memory(const luaretry_policy *p) {
  return p && p->sb ? p->sb->used : 0;
}

int lr_policy_loaded(const luaretry_policy *p) { return p->sb != NULL; }
struct lr_sandbox *lr_policy_sandbox(luaretry_policy *p) { return p->sb; }
int lr_policy_run_ref(const luaretry_policy *p) { return p->sb ? p->ref_run : 0; }
char *lr_policy_errbuf(luaretry_policy *p, size_t *size) {
  *size = sizeof p->errmsg;
  return p->errmsg;
}
const lr_rules *lr_policy_rules(const luaretry_policy *p) { return &p->rules; }

void luaretry_policy_set_log(luaretry_policy *p, luaretry_log_fn fn, void *ud) {
  if (!p) return;
  p->log = fn;
  p->log_ud = ud;
  if (p->sb) p->sb->log = fn, p->sb->log_ud = ud;
}

luaretry_code luaretry_policy_set_classifier(luaretry_policy *p,
                                             luaretry_classify_fn fn, void *ud) {
  if (!p) return LUARETRY_E_ARG;
  p->host_classify = fn;
  p->host_ud = ud;
  return LUARETRY_OK;
}

luaretry_code luaretry_policy_tuning(const luaretry_policy *p, luaretry_tuning *t) {
  if (!p || !t) return LUARETRY_E_ARG;
  if (!p->sb) return LUARETRY_E_STATE;
  *t = p->tuning;
  t->name = p->name;
  t->source = p->source;
  t->instruction_limit = p->instruction_limit;
  t->memory_limit = p->memory_limit;
  return LUARETRY_OK;
}

/* Validates `fields` plus overrides; on success installs rules, tuning and
 * warnings into p.  Returns 0, or -1 with p->errmsg set. */
static int compose(luaretry_policy *p, const lr_field *script_fields,
                   const char *chunk, char **load_warnings, size_t load_count) {
  lr_field fields[F_COUNT];
  memcpy(fields, script_fields, sizeof fields);
  char errors[sizeof p->errmsg] = "";
  char *warnings[MAX_WARNINGS];
  size_t count = 0;
  for (size_t i = 0; i < load_count; i++) {
    char *copy = strdup(load_warnings[i]);
    if (copy) warnings[count++] = copy;
  }
  lr_rules rules;
  luaretry_tuning tuning;
  int failed = apply_overrides(p, fields, errors, sizeof errors) != 0;
  if (!failed) {
    lr_check ck = { p, chunk, fields, errors, sizeof errors, warnings, &count };
    failed = validate(&ck, &rules, &tuning) != 0;
  }
  if (failed) {
    /* A failed load reports everything at once: the errors, then what
     * would have been warnings (a typo'd name is often the cause). */
    for (size_t i = 0; i < count; i++) add_error(errors, sizeof errors, "%s", warnings[i]);
    free_warnings(warnings, &count);
    lr_strlcpy(p->errmsg, errors, sizeof p->errmsg);
    return -1;
  }
  free_warnings(p->warnings, &p->warning_count);
  memcpy(p->warnings, warnings, count * sizeof *warnings);
  p->warning_count = count;
  p->rules = rules;
  p->tuning = tuning;
  if (fields[F_NAME].type == LUA_TSTRING)
    lr_strlcpy(p->name, fields[F_NAME].str, sizeof p->name);
  return 0;
}

static void default_name(char *dst, size_t size, const char *chunk) {
  const char *base = strrchr(chunk, '/');
  base = base ? base + 1 : chunk;
  lr_strlcpy(dst, base, size);
  char *dot = strrchr(dst, '.');
  if (dot && strcmp(dot, ".lua") == 0) *dot = '\0';
}

static luaretry_code load(luaretry_policy *p, const char *path,
                          const char *chunkname, const char *source) {
  if (!p || (!path && !source)) return LUARETRY_E_ARG;
  p->errmsg[0] = '\0';
  if (path) {
    FILE *f = fopen(path, "r");
    if (!f) {
      lr_fmt(p->errmsg, sizeof p->errmsg, "%s: cannot open: %s", path, strerror(errno));
      return LUARETRY_E_IO;
    }
    fclose(f);
  }
  lr_load *ld = calloc(1, sizeof *ld);
  if (!ld) return LUARETRY_E_NOMEM;
  ld->p = p;
  ld->path = path;
  ld->chunkname = chunkname ? chunkname : "=policy";
  ld->source = source;
  ld->sb = lr_sandbox_new(p->memory_limit, p->instruction_limit, path);
  if (!ld->sb) {
    free(ld);
    lr_fmt(p->errmsg, sizeof p->errmsg, "cannot create a Lua state "
             "(memory_limit %zu bytes too small?)", p->memory_limit);
    return LUARETRY_E_NOMEM;
  }
  ld->sb->owner = p;
  ld->sb->log = p->log;
  ld->sb->log_ud = p->log_ud;
  char err[sizeof p->errmsg];
  luaretry_code rc = lr_sandbox_call(ld->sb, load_protected, ld, 0,
                                     LUARETRY_E_POLICY, err, sizeof err);
  if (rc == LUARETRY_E_POLICY && ld->syntax_error) rc = LUARETRY_E_SYNTAX;
  if (rc == LUARETRY_E_POLICY && ld->io_error) rc = LUARETRY_E_IO;
  if (rc == LUARETRY_OK) {
    char chunk[1024];
    lr_strlcpy(chunk, ld->chunk_src, sizeof chunk);
    if (compose(p, ld->fields, chunk, ld->warnings, ld->warning_count) != 0)
      rc = LUARETRY_E_POLICY;
    else {
      lr_sandbox_free(p->sb);
      p->sb = ld->sb;
      ld->sb = NULL;
      memcpy(p->fields, ld->fields, sizeof p->fields);
      free_warnings(p->load_warnings, &p->load_warning_count);
      memcpy(p->load_warnings, ld->warnings, ld->warning_count * sizeof *ld->warnings);
      p->load_warning_count = ld->warning_count;
      ld->warning_count = 0;
      p->ref_info = ld->ref_info;
      p->ref_is_transient = ld->refs[F_IS_TRANSIENT];
      p->ref_is_success = ld->refs[F_IS_SUCCESS];
      p->ref_on_retry = ld->refs[F_ON_RETRY];
      p->ref_is_idempotent = ld->refs[F_IS_IDEMPOTENT];
      p->ref_prepare = ld->refs[F_PREPARE];
      p->ref_options = ld->ref_options;
      p->ref_run = ld->refs[F_RUN];
      p->ref_backoff = ld->refs[F_BACKOFF];
      p->ref_headers = LUA_NOREF;
      lr_strlcpy(p->source, chunk, sizeof p->source);
      if (ld->fields[F_NAME].type != LUA_TSTRING)
        default_name(p->name, sizeof p->name, chunk);
      memcpy(p->rule_is_transient, ld->rule_is_transient, sizeof p->rule_is_transient);
      memcpy(p->rule_is_success, ld->rule_is_success, sizeof p->rule_is_success);
      memcpy(p->rule_backoff, ld->rule_backoff, sizeof p->rule_backoff);
      memcpy(p->rule_is_idempotent, ld->rule_is_idempotent, sizeof p->rule_is_idempotent);
    }
  } else {
    lr_strlcpy(p->errmsg, err, sizeof p->errmsg);
  }
  free_warnings(ld->warnings, &ld->warning_count);
  lr_sandbox_free(ld->sb);
  free(ld);
  return rc;
}

luaretry_code luaretry_policy_load_file(luaretry_policy *p, const char *path) {
  return load(p, path, NULL, NULL);
}

luaretry_code luaretry_policy_load_string(luaretry_policy *p, const char *chunkname,
                                          const char *source) {
  return load(p, NULL, chunkname, source);
}

static int parse_limit(const char *v, double lo, double *out) {
  char *end;
  double d = strtod(v, &end);
  if (end == v || *end || !isfinite(d) || d < lo || d > 1e15 || d != floor(d)) return -1;
  *out = d;
  return 0;
}

luaretry_code luaretry_policy_set(luaretry_policy *p, const char *name,
                                  const char *value) {
  if (!p || !name || !value) return LUARETRY_E_ARG;
  p->errmsg[0] = '\0';
  int i = field_index(name);
  int option = strncmp(name, "options.", 8) == 0 && name[8];
  if (i == F_INSTRUCTION_LIMIT || i == F_MEMORY_LIMIT) {
    double d;
    if (parse_limit(value, i == F_MEMORY_LIMIT ? 65536 : 1000, &d) != 0) {
      lr_fmt(p->errmsg, sizeof p->errmsg, "--set %s: expected a whole number "
               "of %s, at least %s, got \"%s\"", name,
               i == F_MEMORY_LIMIT ? "bytes" : "instructions",
               i == F_MEMORY_LIMIT ? "65536" : "1000", value);
      return LUARETRY_E_ARG;
    }
    if (i == F_MEMORY_LIMIT) {
      p->memory_limit = (size_t)d;
      if (p->sb) p->sb->limit = p->memory_limit;
    } else {
      p->instruction_limit = (long)d;
      if (p->sb) p->sb->instruction_limit = p->instruction_limit;
    }
    return LUARETRY_OK;
  }
  if (!option && (i < 0 || FIELDS[i].kind == K_FUNCTION || i == F_BACKOFF ||
                  FIELDS[i].kind == K_GUARD || FIELDS[i].kind == K_OPTIONS)) {
    const char *near = i < 0 ? closest_field(name, strncmp(name, "backoff.", 8) ? "" : "backoff.") : NULL;
    if (i >= 0)
      lr_fmt(p->errmsg, sizeof p->errmsg, "--set %s: can only be set in the script", name);
    else
      lr_fmt(p->errmsg, sizeof p->errmsg, "--set %s: unknown name%s%s%s", name,
               near ? ", did you mean " : "", near ? near : "", near ? "?" : "");
    return LUARETRY_E_ARG;
  }
  if (strlen(value) >= sizeof p->overrides[0].value) {
    lr_fmt(p->errmsg, sizeof p->errmsg, "--set %s: value too long", name);
    return LUARETRY_E_ARG;
  }
  size_t k = 0;
  while (k < p->override_count && strcmp(p->overrides[k].name, name) != 0) k++;
  if (k == MAX_OVERRIDES) {
    lr_fmt(p->errmsg, sizeof p->errmsg, "--set %s: too many overrides", name);
    return LUARETRY_E_ARG;
  }
  lr_override saved = p->overrides[k];
  size_t saved_count = p->override_count;
  lr_strlcpy(p->overrides[k].name, name, sizeof p->overrides[k].name);
  lr_strlcpy(p->overrides[k].value, value, sizeof p->overrides[k].value);
  if (k == p->override_count) p->override_count++;
  if (!p->sb) return LUARETRY_OK;  /* checked at load */
  /* Loaded: validate now, keep the policy as it was when refused. */
  if (option) {
    luaretry_code rc = LUARETRY_E_ARG;
    if (!p->ref_options)
      lr_fmt(p->errmsg, sizeof p->errmsg, "--set %s: %s declares no options", name, p->source);
    else {
      p->cur_option_name = name + 8;
      p->cur_option_value = value;
      char err[512];
      rc = lr_sandbox_call(p->sb, set_option_protected, p, 0, LUARETRY_E_ARG, err, sizeof err);
      if (rc != LUARETRY_OK) lr_strlcpy(p->errmsg, err, sizeof p->errmsg);
    }
    if (rc != LUARETRY_OK) {
      p->overrides[k] = saved;
      p->override_count = saved_count;
      return LUARETRY_E_ARG;
    }
    return LUARETRY_OK;
  }
  if (compose(p, p->fields, p->source, p->load_warnings, p->load_warning_count) != 0) {
    p->overrides[k] = saved;
    p->override_count = saved_count;
    return LUARETRY_E_ARG;
  }
  return LUARETRY_OK;
}

/* ---- the calls into the script on each decision */

static void push_headers(lua_State *L, luaretry_policy *p) {
  if (p->headers_generation == p->generation && p->ref_headers != LUA_NOREF) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, p->ref_headers);
    return;
  }
  const luaretry_outcome *o = p->cur;
  lua_createtable(L, 0, (int)o->header_count);
  for (size_t i = 0; i < o->header_count; i++) {
    /* Scripts are promised lower-case names, whatever the host passed. */
    const char *name = o->headers[i].name ? o->headers[i].name : "";
    size_t len = strlen(name);
    luaL_Buffer lb;
    char *lower = luaL_buffinitsize(L, &lb, len);
    for (size_t k = 0; k < len; k++)
      lower[k] = name[k] >= 'A' && name[k] <= 'Z' ? (char)(name[k] + 32) : name[k];
    luaL_pushresultsize(&lb, len);
    lua_pushstring(L, o->headers[i].value ? o->headers[i].value : "");
    lua_rawset(L, -3);
  }
  lua_pushvalue(L, -1);
  if (p->ref_headers == LUA_NOREF) p->ref_headers = luaL_ref(L, LUA_REGISTRYINDEX);
  else lua_rawseti(L, LUA_REGISTRYINDEX, p->ref_headers);
  p->headers_generation = p->generation;
}

static int info_index(lua_State *L) {
  luaretry_policy *p = lua_touserdata(L, lua_upvalueindex(1));
  const char *k = lua_tostring(L, 2);
  const luaretry_outcome *o = p->cur;
  if (!k || !o) return 0;
  if (strcmp(k, "attempt") == 0) lua_pushinteger(L, p->cur_ctx->attempt);
  else if (strcmp(k, "elapsed") == 0) lua_pushnumber(L, p->cur_ctx->elapsed);
  else if (strcmp(k, "error") == 0) o->error ? (void)lua_pushstring(L, o->error) : lua_pushnil(L);
  else if (strcmp(k, "method") == 0) o->method ? (void)lua_pushstring(L, o->method) : lua_pushnil(L);
  else if (strcmp(k, "url") == 0) o->url ? (void)lua_pushstring(L, o->url) : lua_pushnil(L);
  else if (strcmp(k, "workflow") == 0) lua_pushboolean(L, o->workflow);
  else if (strcmp(k, "kind") == 0)
    lua_pushstring(L, o->kind == LUARETRY_OUTCOME_COMMAND ? "command" : "http");
  else if (strcmp(k, "headers") == 0) push_headers(L, p);
  else return 0;
  return 1;
}

static int call_classifier(lua_State *L) {
  luaretry_policy *p = lua_touserdata(L, 1);
  const luaretry_outcome *o = p->cur;
  size_t len = o->body ? o->body_len : 0;
  if (len > p->tuning.body_limit) len = p->tuning.body_limit;
  lua_rawgeti(L, LUA_REGISTRYINDEX, p->cur_fn);
  lua_pushinteger(L, o->status);
  lua_pushlstring(L, o->body ? o->body : "", len);
  lua_rawgeti(L, LUA_REGISTRYINDEX, p->ref_info);
  lua_call(L, 3, 1);
  return 1;
}

static const char *luatype_of_result(lua_State *L) {
  return lua_typename(L, lua_type(L, -1));
}

/* Runs is_success or is_transient; 0 with the result on the stack, or -1
 * with v filled as a policy error. */
static int run_hook(luaretry_policy *p, int ref, const char *fname,
                    const char *rule, lr_verdict *v) {
  p->cur_fn = ref;
  char err[sizeof v->message];
  luaretry_code rc = lr_sandbox_call(p->sb, call_classifier, p, 1,
                                     LUARETRY_E_POLICY, err, sizeof err);
  if (rc == LUARETRY_OK) return 0;
  v->cls = LUARETRY_CLASS_ERROR;
  v->rule = rule;
  lr_fmt(v->message, sizeof v->message, "%s: %s", fname, err);
  return -1;
}

static void default_classify(const luaretry_outcome *o, lr_verdict *v) {
  v->rule = "default";
  if (o->kind == LUARETRY_OUTCOME_COMMAND) {
    v->cls = o->status == 0 ? LUARETRY_CLASS_SUCCESS : LUARETRY_CLASS_TRANSIENT;
    return;
  }
  switch (o->status) {
  case 0: case 408: case 429: case 500: case 502: case 503: case 504:
    v->cls = LUARETRY_CLASS_TRANSIENT;
    return;
  }
  v->cls = o->error ? LUARETRY_CLASS_TRANSIENT : LUARETRY_CLASS_FINAL;
}

static int default_success(const luaretry_outcome *o) {
  if (o->error) return 0;
  if (o->kind == LUARETRY_OUTCOME_COMMAND) return o->status == 0;
  return o->status >= 200 && o->status <= 399;
}

static void classify(void *ud, const luaretry_outcome *o, const lr_attempt_ctx *ctx,
                     lr_verdict *v) {
  luaretry_policy *p = ud;
  if (p->host_classify) {
    double wait = -1;
    v->cls = p->host_classify(p->host_ud, o, ctx->attempt, &wait);
    v->wait = wait >= 0 && isfinite(wait) ? wait : -1;
    v->rule = "host classifier";
    if (v->cls != LUARETRY_CLASS_SUCCESS && v->cls != LUARETRY_CLASS_FINAL &&
        v->cls != LUARETRY_CLASS_TRANSIENT) {
      /* ERROR, or a value outside the enum: a policy error with a message */
      lr_fmt(v->message, sizeof v->message, "the host classifier %s "
             "(attempt %d)", v->cls == LUARETRY_CLASS_ERROR ? "failed"
             : "returned an unknown class", ctx->attempt);
      v->cls = LUARETRY_CLASS_ERROR;
    }
    return;
  }
  lua_State *L = p->sb->L;
  p->cur = o;
  p->cur_ctx = ctx;
  p->generation++;
  if (p->ref_is_success) {
    if (run_hook(p, p->ref_is_success, "is_success", p->rule_is_success, v)) goto done;
    int t = lua_type(L, -1), yes = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (t != LUA_TBOOLEAN && t != LUA_TNIL) {
      v->cls = LUARETRY_CLASS_ERROR;
      v->rule = p->rule_is_success;
      lr_fmt(v->message, sizeof v->message, "%s: is_success returned a %s "
               "(expected true, false or nil)", p->rule_is_success, lua_typename(L, t));
      goto done;
    }
    if (yes) {
      v->cls = LUARETRY_CLASS_SUCCESS;
      v->rule = p->rule_is_success;
      goto done;
    }
  } else if (default_success(o)) {
    v->cls = LUARETRY_CLASS_SUCCESS;
    v->rule = "default";
    goto done;
  }
  if (!p->ref_is_transient) {
    default_classify(o, v);
    goto done;
  }
  if (run_hook(p, p->ref_is_transient, "is_transient", p->rule_is_transient, v)) goto done;
  v->rule = p->rule_is_transient;
  switch (lua_type(L, -1)) {
  case LUA_TBOOLEAN:
    v->cls = lua_toboolean(L, -1) ? LUARETRY_CLASS_TRANSIENT : LUARETRY_CLASS_FINAL;
    break;
  case LUA_TNIL:
    v->cls = LUARETRY_CLASS_FINAL;
    break;
  case LUA_TNUMBER: {
    double w = lua_tonumber(L, -1);
    if (isfinite(w) && w >= 0) {
      v->cls = LUARETRY_CLASS_TRANSIENT;
      v->wait = w;
      break;
    }
    v->cls = LUARETRY_CLASS_ERROR;
    lr_fmt(v->message, sizeof v->message, "%s: is_transient returned %g "
             "(a wait must be a finite number of seconds, 0 or more)",
             p->rule_is_transient, w);
    break;
  }
  default:
    v->cls = LUARETRY_CLASS_ERROR;
    lr_fmt(v->message, sizeof v->message, "%s: is_transient returned a %s "
             "(expected true, false, nil or a number of seconds)",
             p->rule_is_transient, luatype_of_result(L));
    break;
  }
  lua_pop(L, 1);
done:
  p->cur = NULL;
}

static int call_backoff(lua_State *L) {
  luaretry_policy *p = lua_touserdata(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, p->ref_backoff);
  lua_pushinteger(L, p->backoff_n);
  lua_pushnumber(L, p->backoff_previous);
  lua_call(L, 2, 1);
  return 1;
}

static int script_backoff(void *ud, long n, double previous, double *wait,
                          lr_verdict *v) {
  luaretry_policy *p = ud;
  p->backoff_n = n;
  p->backoff_previous = previous;
  char err[sizeof v->message];
  v->rule = p->rule_backoff;
  luaretry_code rc = lr_sandbox_call(p->sb, call_backoff, p, 1, LUARETRY_E_POLICY,
                                     err, sizeof err);
  if (rc != LUARETRY_OK) {
    lr_fmt(v->message, sizeof v->message, "backoff: %s", err);
    return -1;
  }
  lua_State *L = p->sb->L;
  int isnum;
  double w = lua_tonumberx(L, -1, &isnum);
  int type = lua_type(L, -1);
  lua_pop(L, 1);
  if (type == LUA_TNUMBER && isnum && isfinite(w) && w >= 0) {
    *wait = w;
    return 0;
  }
  lr_fmt(v->message, sizeof v->message, "%s: backoff returned %s%s (expected a "
           "finite number of seconds, 0 or more)", p->rule_backoff,
           type == LUA_TNUMBER ? "" : "a ", type == LUA_TNUMBER ? "an invalid number"
                                                                : lua_typename(L, type));
  return -1;
}

static int call_on_retry(lua_State *L) {
  luaretry_policy *p = lua_touserdata(L, 1);
  const luaretry_decision *d = p->cur_decision;
  const luaretry_outcome *o = p->cur;
  lua_rawgeti(L, LUA_REGISTRYINDEX, p->ref_on_retry);
  lua_createtable(L, 0, 8);
  lua_pushinteger(L, d->attempt); lua_setfield(L, -2, "attempt");
  lua_pushinteger(L, o->status); lua_setfield(L, -2, "status");
  if (o->error) { lua_pushstring(L, o->error); lua_setfield(L, -2, "error"); }
  lua_pushnumber(L, d->wait); lua_setfield(L, -2, "delay");
  lua_pushnumber(L, d->elapsed); lua_setfield(L, -2, "elapsed");
  lua_pushstring(L, luaretry_wait_source_name(d->wait_source));
  lua_setfield(L, -2, "wait_source");
  lua_pushstring(L, d->rule); lua_setfield(L, -2, "rule");
  lua_call(L, 1, 0);
  return 0;
}

static const char *on_retry(void *ud, const luaretry_outcome *o,
                            const luaretry_decision *d) {
  luaretry_policy *p = ud;
  p->cur = o;
  p->cur_decision = d;
  char err[sizeof p->hook_error - 16];
  luaretry_code rc = lr_sandbox_call(p->sb, call_on_retry, p, 0, LUARETRY_E_POLICY,
                                     err, sizeof err);
  p->cur = NULL;
  if (rc == LUARETRY_OK) return NULL;
  lr_fmt(p->hook_error, sizeof p->hook_error, "on_retry: %s", err);
  return p->hook_error;
}

lr_judge lr_policy_judge(luaretry_policy *p) {
  lr_judge j = { p, classify, NULL, NULL };
  if (p->ref_backoff) j.backoff = script_backoff;
  if (p->ref_on_retry) j.on_retry = on_retry;
  return j;
}

/* ---- requests: is_idempotent(request) and prepare(request, attempt) */

static void push_request(lua_State *L, const luaretry_request *r) {
  lua_createtable(L, 0, 4);
  if (r->method) { lua_pushstring(L, r->method); lua_setfield(L, -2, "method"); }
  if (r->url) { lua_pushstring(L, r->url); lua_setfield(L, -2, "url"); }
  if (r->body) { lua_pushlstring(L, r->body, r->body_len); lua_setfield(L, -2, "body"); }
  lua_createtable(L, 0, (int)r->header_count);
  for (size_t i = 0; i < r->header_count; i++) {
    lua_pushstring(L, r->headers[i].value ? r->headers[i].value : "");
    lua_setfield(L, -2, r->headers[i].name);
  }
  lua_setfield(L, -2, "headers");
}

static int call_is_idempotent(lua_State *L) {
  luaretry_policy *p = lua_touserdata(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, p->ref_is_idempotent);
  push_request(L, p->cur_request);
  lua_call(L, 1, 1);
  return 1;
}

static int method_is_idempotent(const char *m) {
  static const char *const safe[] = { "GET", "HEAD", "OPTIONS", "PUT", "DELETE", NULL };
  if (!m) return 1;  /* no method: a GET */
  for (int i = 0; safe[i]; i++)
    if (strcmp(m, safe[i]) == 0) return 1;
  return 0;
}

luaretry_code luaretry_policy_is_idempotent(luaretry_policy *p,
                                            const luaretry_request *r,
                                            int *idempotent) {
  if (!p || !r || !idempotent) return LUARETRY_E_ARG;
  if (!p->sb) return LUARETRY_E_STATE;
  if (!p->ref_is_idempotent) {
    *idempotent = method_is_idempotent(r->method);
    return LUARETRY_OK;
  }
  p->cur_request = r;
  char err[1024];
  luaretry_code rc = lr_sandbox_call(p->sb, call_is_idempotent, p, 1,
                                     LUARETRY_E_POLICY, err, sizeof err);
  p->cur_request = NULL;
  if (rc != LUARETRY_OK) {
    lr_fmt(p->errmsg, sizeof p->errmsg, "is_idempotent: %s", err);
    return rc;
  }
  lua_State *L = p->sb->L;
  int t = lua_type(L, -1);
  *idempotent = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (t != LUA_TBOOLEAN && t != LUA_TNIL) {
    lr_fmt(p->errmsg, sizeof p->errmsg, "%s: is_idempotent returned a %s "
           "(expected true, false or nil)", p->rule_is_idempotent, lua_typename(L, t));
    return LUARETRY_E_POLICY;
  }
  return LUARETRY_OK;
}

static void free_prepared(luaretry_policy *p) {
  free(p->prep_method);
  free(p->prep_url);
  free(p->prep_body);
  for (size_t i = 0; i < p->prep_header_count; i++) {
    free((char *)p->prep_headers[i].name);
    free((char *)p->prep_headers[i].value);
  }
  free(p->prep_headers);
  p->prep_method = p->prep_url = p->prep_body = NULL;
  p->prep_headers = NULL;
  p->prep_header_count = p->prep_body_len = 0;
}

static char *copy_field(lua_State *L, int t, const char *k, size_t *len) {
  char *copy = NULL;
  if (lua_getfield(L, t, k) == LUA_TSTRING) {
    size_t n;
    const char *s = lua_tolstring(L, -1, &n);
    copy = malloc(n + 1);
    if (copy) memcpy(copy, s, n + 1);
    if (len) *len = n;
  }
  lua_pop(L, 1);
  return copy;
}

/* Copies the request table at the top into p->prep_* (in C memory: Lua's
 * strings may be collected once the table is dropped). */
static int call_prepare(lua_State *L) {
  luaretry_policy *p = lua_touserdata(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, p->ref_prepare);
  push_request(L, p->cur_request);
  lua_pushvalue(L, -1);
  lua_insert(L, -3);                       /* keep the table below the call */
  lua_pushinteger(L, p->cur_attempt);
  lua_call(L, 2, 1);
  if (lua_istable(L, -1)) lua_replace(L, -2);  /* a returned table wins */
  else lua_pop(L, 1);
  int t = lua_gettop(L);
  if (lua_getfield(L, t, "url") != LUA_TSTRING)
    return luaL_error(L, "prepare: request.url must be a string");
  lua_pop(L, 1);
  p->prep_method = copy_field(L, t, "method", NULL);
  p->prep_url = copy_field(L, t, "url", NULL);
  p->prep_body = copy_field(L, t, "body", &p->prep_body_len);
  if (lua_getfield(L, t, "headers") == LUA_TTABLE) {
    size_t n = 0;
    lua_pushnil(L);
    while (lua_next(L, -2)) n++, lua_pop(L, 1);
    p->prep_headers = calloc(n ? n : 1, sizeof *p->prep_headers);
    if (!p->prep_headers) return luaL_error(L, "prepare: out of memory");
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      if (lua_type(L, -2) != LUA_TSTRING || !lua_isstring(L, -1))
        return luaL_error(L, "prepare: request.headers must map names to strings");
      luaretry_header *h = &p->prep_headers[p->prep_header_count++];
      h->name = strdup(lua_tostring(L, -2));
      h->value = strdup(lua_tostring(L, -1));
      lua_pop(L, 1);
    }
  }
  return 0;
}

luaretry_code luaretry_policy_prepare(luaretry_policy *p, const luaretry_request *in,
                                      int attempt, luaretry_request *out) {
  if (!p || !in || !out) return LUARETRY_E_ARG;
  if (!p->sb) return LUARETRY_E_STATE;
  *out = *in;
  if (!p->ref_prepare) return LUARETRY_OK;
  free_prepared(p);
  p->cur_request = in;
  p->cur_attempt = attempt;
  char err[1024];
  luaretry_code rc = lr_sandbox_call(p->sb, call_prepare, p, 0, LUARETRY_E_POLICY,
                                     err, sizeof err);
  p->cur_request = NULL;
  if (rc != LUARETRY_OK) {
    free_prepared(p);
    lr_fmt(p->errmsg, sizeof p->errmsg, "prepare: %s", err);
    return rc;
  }
  for (size_t i = 0; i < p->prep_header_count; i++)
    if (!p->prep_headers[i].name || !p->prep_headers[i].value) {
      free_prepared(p);
      return LUARETRY_E_NOMEM;
    }
  out->method = p->prep_method ? p->prep_method : in->method;
  out->url = p->prep_url;
  out->headers = p->prep_headers;
  out->header_count = p->prep_header_count;
  out->body = p->prep_body;
  out->body_len = p->prep_body_len;
  return LUARETRY_OK;
}
