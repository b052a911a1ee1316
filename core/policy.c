/* policy.c: loading a policy script into its sandbox, and the policy's
 * public side (overrides, reload, tuning).  Everything that touches Lua
 * runs under protection (lr_sandbox_call). */
#include <errno.h>
#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

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

/* Whether `name` is a field: a top-level one when prefix is "", else one
 * of the table field `prefix` ("backoff." ...). */
static int is_known(const char *name, const char *prefix) {
  size_t plen = strlen(prefix);
  for (int i = plen ? F_FIRST_SUB : 0; i < (plen ? F_COUNT : F_FIRST_SUB); i++) {
    const char *f = lr_fields[i].name;
    if (strncmp(f, prefix, plen) == 0 && strcmp(f + plen, name) == 0) return 1;
  }
  return 0;
}

/* Warns of each string key of table `t` that no field has; `baseline`
 * (or 0) holds names the sandbox itself put there. */
static void unknown_names(lua_State *L, lr_load *ld, int t, int baseline,
                          int lines, int default_line, const char *prefix) {
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING) continue;
    const char *k = lua_tostring(L, -1);
    if (is_known(k, prefix)) continue;
    if (baseline) {
      lua_pushvalue(L, -1);
      int base = lua_rawget(L, baseline) != LUA_TNIL;
      lua_pop(L, 1);
      if (base) continue;
    }
    int line = *prefix ? default_line : line_of(L, lines, k);
    const char *near = lr_closest_field(k, prefix);
    char where[1100];
    if (line) lr_fmt(where, sizeof where, "%s:%d", ld->chunk_src, line);
    else lr_fmt(where, sizeof where, "%s", ld->chunk_src);
    lr_add_warning(ld->warnings, &ld->warning_count,
                "%s: %s%s: unknown name%s%s%s", where, prefix,
                k, near ? ", did you mean " : "", near ? near : "",
                near ? "?" : "");
  }
}

/* Reads the fields of the table field `parent` (at index t). */
static void read_table_fields(lua_State *L, lr_load *ld, int parent, int t, int line) {
  char prefix[32];
  lr_fmt(prefix, sizeof prefix, "%s.", lr_fields[parent].name);
  size_t plen = strlen(prefix);
  for (int j = F_FIRST_SUB; j < F_COUNT; j++) {
    if (strncmp(lr_fields[j].name, prefix, plen) != 0) continue;
    lua_pushstring(L, lr_fields[j].name + plen);
    lua_rawget(L, t);
    read_field(L, &ld->fields[j], line);
  }
  unknown_names(L, ld, t, 0, 0, line, prefix);
}

static void function_rule(lua_State *L, int idx, char *rule, size_t size) {
  lua_Debug ar;
  lua_pushvalue(L, idx);
  lua_getinfo(L, ">S", &ar);
  lr_fmt(rule, size, "%s:%d", ar.short_src, ar.linedefined);
}


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

  for (int i = 0; i < F_FIRST_SUB; i++) {
    lua_getfield(L, src, lr_fields[i].name);  /* no metatable on either: raw */
    int line = line_of(L, lines, lr_fields[i].name);
    if (lua_type(L, -1) == LUA_TFUNCTION) {
      char *rule = i == F_IS_TRANSIENT ? ld->rule_is_transient
                 : i == F_IS_SUCCESS ? ld->rule_is_success
                 : i == F_BACKOFF ? ld->rule_backoff
                 : i == F_IS_IDEMPOTENT ? ld->rule_is_idempotent : NULL;
      if (rule) function_rule(L, -1, rule, sizeof ld->rule_is_transient);
      lua_pushvalue(L, -1);
      ld->refs[i] = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    if ((i == F_BACKOFF || i == F_BUDGET || i == F_BREAKER) && lua_type(L, -1) == LUA_TTABLE)
      read_table_fields(L, ld, i, lua_gettop(L), line);
    read_field(L, &ld->fields[i], line);
  }
  unknown_names(L, ld, src, from_table ? 0 : 1, lines, 0, "");

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
  lua_pushcclosure(L, lr_info_index, 1);
  lua_setfield(L, -2, "__index");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
  ld->ref_info = luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

/* ---- the public side */

static void breaker_changed(void *ud, luaretry_breaker_state state) {
  luaretry_policy *p = ud;
  if (p->breaker_fn) p->breaker_fn(p->breaker_ud, state);
}

luaretry_code luaretry_policy_new(luaretry_policy **out) {
  if (!out) return LUARETRY_E_ARG;
  luaretry_policy *p = calloc(1, sizeof *p);
  *out = p;
  if (!p) return LUARETRY_E_NOMEM;
  p->instruction_limit = DEFAULT_INSTRUCTION_LIMIT;
  p->memory_limit = DEFAULT_MEMORY_LIMIT;
  lr_guards none;
  memset(&none, 0, sizeof none);
  lr_shared_init(&p->shared, &none);
  p->shared.on_change = breaker_changed;
  p->shared.on_change_ud = p;
  return LUARETRY_OK;
}

lr_shared *lr_policy_shared(luaretry_policy *p) { return &p->shared; }

void luaretry_policy_on_breaker(luaretry_policy *p, luaretry_breaker_fn fn, void *ud) {
  if (!p) return;
  p->breaker_fn = fn;
  p->breaker_ud = ud;
}

luaretry_code luaretry_policy_metrics(const luaretry_policy *p, luaretry_metrics *m) {
  if (!p || !m) return LUARETRY_E_ARG;
  lr_shared *s = (lr_shared *)&p->shared;
  long long c[LR_METRIC_COUNT];
  for (int i = 0; i < LR_METRIC_COUNT; i++) c[i] = atomic_load(&s->counters[i]);
  memset(m, 0, sizeof *m);
  m->calls = (uint64_t)c[LR_M_CALLS];
  m->attempts = (uint64_t)c[LR_M_ATTEMPTS];
  m->retries = (uint64_t)c[LR_M_RETRIES];
  m->successes = (uint64_t)c[LR_M_SUCCESSES];
  m->finals = (uint64_t)c[LR_M_FINALS];
  m->exhausted = (uint64_t)c[LR_M_EXHAUSTED];
  m->deadline_stops = (uint64_t)c[LR_M_DEADLINE];
  m->policy_errors = (uint64_t)c[LR_M_POLICY_ERRORS];
  m->cancelled = (uint64_t)c[LR_M_CANCELLED];
  m->budget_refusals = (uint64_t)c[LR_M_BUDGET];
  m->circuit_refusals = (uint64_t)c[LR_M_CIRCUIT];
  m->breaker_openings = (uint64_t)c[LR_M_BREAKER_OPENINGS];
  m->time_waited = (double)atomic_load(&s->waited_ns) * 1e-9;
  m->budget_tokens = s->guards.budget ? lr_budget_tokens(s) : 0;
  m->breaker = (luaretry_breaker_state)atomic_load(&s->breaker_state);
  return LUARETRY_OK;
}

void luaretry_policy_free(luaretry_policy *p) {
  if (!p) return;
  lr_sandbox_free(p->sb);
  lr_free_warnings(p->warnings, &p->warning_count);
  lr_free_warnings(p->load_warnings, &p->load_warning_count);
  lr_free_prepared(p);
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
    if (lr_compose(p, ld->fields, chunk, ld->warnings, ld->warning_count) != 0)
      rc = LUARETRY_E_POLICY;
    else {
      lr_sandbox_free(p->sb);
      p->sb = ld->sb;
      ld->sb = NULL;
      memcpy(p->fields, ld->fields, sizeof p->fields);
      lr_free_warnings(p->load_warnings, &p->load_warning_count);
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
  lr_free_warnings(ld->warnings, &ld->warning_count);
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
  int i = lr_field_index(name);
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
  if (!option && (i < 0 || lr_fields[i].kind == K_FUNCTION || i == F_BACKOFF ||
                  lr_fields[i].kind == K_GUARD || lr_fields[i].kind == K_OPTIONS)) {
    char prefix[32] = "";
    const char *dot = strchr(name, '.');
    if (dot && (size_t)(dot - name) < sizeof prefix - 1) {
      memcpy(prefix, name, (size_t)(dot - name) + 1);
      prefix[dot - name + 1] = '\0';
    }
    const char *near = i < 0 ? lr_closest_field(dot ? dot + 1 : name, prefix) : NULL;
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
  if (lr_compose(p, p->fields, p->source, p->load_warnings, p->load_warning_count) != 0) {
    p->overrides[k] = saved;
    p->override_count = saved_count;
    return LUARETRY_E_ARG;
  }
  return LUARETRY_OK;
}
