/* lmodule.c: `require "luaretry"` for stock lua5.4.  A thin binding of the
 * public API (plus the backoff sampler, for the arithmetic's specs); it
 * knows nothing of HTTP.  Loaded policies live in their own sandboxed
 * states; this file only touches the host's state. */
#include <lauxlib.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "luaretry.h"
#include "luaretry_tool.h"

#define POLICY_MT "luaretry.policy"
#define CALL_MT   "luaretry.call"
#define BUSY_MT   "luaretry.busy"

typedef struct {
  luaretry_policy *p;
  lua_State *L; /* the thread whose library call is in progress (opts.log
                   runs on it), or NULL: see host_enter */
  int log_ref;  /* opts.log, a host function, or LUA_NOREF */
  int calls;    /* live calls: a policy outlives its calls, whatever
                        order Lua finalizes them in */
  int busy;     /* library calls in progress: a close from inside one
                        (opts.log) waits until they are all back */
  int closed;
} policy_box;
typedef struct {
  luaretry_call *c;
  int busy; /* inside report/next/run/prepare/is_idempotent: a callback may not reenter */
} call_box;

static void policy_release(lua_State *L, policy_box *b);

static luaretry_policy *check_policy(lua_State *L, int i) {
  policy_box *b = luaL_checkudata(L, i, POLICY_MT);
  if (!b->p || b->closed) luaL_error(L, "policy is closed");
  return b->p;
}

/* The options table of `fn` at t (absent: nil) holds only the names in
 * `known` (NULL-ended): a misspelt one (virtaul = true) would otherwise be
 * ignored without a word, and the call would run on the real clock. */
static void check_opts(lua_State *L, int t, const char *fn, const char *const *known) {
  if (lua_isnoneornil(L, t)) return;
  if (!lua_istable(L, t))
    luaL_error(L, "%s: options: a table expected, got %s", fn, luaL_typename(L, t));
  t = lua_absindex(L, t);
  for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1)) {
    const char *name = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
    size_t k = 0;
    while (known[k] && (!name || strcmp(known[k], name) != 0)) k++;
    if (known[k]) continue;
    luaL_Buffer b; /* the key and value stay below: the buffer starts above them */
    luaL_buffinit(L, &b);
    for (size_t i = 0; known[i]; i++) {
      luaL_addstring(&b, i == 0 ? "" : known[i + 1] ? ", " : " or ");
      luaL_addstring(&b, known[i]);
    }
    luaL_pushresult(&b);
    if (!name)
      luaL_error(L, "%s: options: a %s key (%s expected)", fn, luaL_typename(L, -3),
                 lua_tostring(L, -1));
    luaL_error(L, "%s: unknown option '%s' (%s expected)", fn, name, lua_tostring(L, -1));
  }
}

/* Field k of the table at t as an integer, def when it is nil (required:
 * an error then).  Named in the error: luaL_checkinteger on the pushed
 * field would report "bad argument #-2". */
/* An integer field of at least `lo` (a seed of -1 wrapped to 2^64 - 1, an
 * attempts of 0 meant the default: neither can the command take). */
static lua_Integer int_field(lua_State *L, int t, const char *k, int required, lua_Integer def,
                             lua_Integer lo) {
  int type = lua_getfield(L, t, k), is_int = 0;
  lua_Integer v = lua_tointegerx(L, -1, &is_int);
  if (type == LUA_TNIL && !required)
    v = def;
  else if (!is_int && type == LUA_TNUMBER)
    luaL_error(L, "%s: an integer expected, got %f", k, lua_tonumber(L, -1));
  else if (!is_int)
    luaL_error(L, "%s: an integer expected, got %s", k, luaL_typename(L, -1));
  else if (v < lo)
    luaL_error(L, "%s: %I is below %I", k, v, lo);
  lua_pop(L, 1);
  return v;
}

/* A setting's value as luaretry_policy_set takes it: a number whole (an
 * integer as one, a float to 17 digits: luaL_tolstring's 14 changed 1/3),
 * anything else as tostring gives it.  Pushed; *len its length. */
static const char *setting_text(lua_State *L, int idx, size_t *len) {
  if (lua_type(L, idx) == LUA_TNUMBER && !lua_isinteger(L, idx)) {
    char buf[40];
    snprintf(buf, sizeof buf, "%.17g", (double)lua_tonumber(L, idx));
    lua_pushstring(L, buf);
    return lua_tolstring(L, -1, len);
  }
  return luaL_tolstring(L, idx, len);
}

/* opts.log runs on the thread that made the library call in progress,
 * which is alive while it waits for it.  b->L names that thread only for
 * the call's length and is put back after: calls nest (a log's own calls
 * end before the call that logged goes on) and none yields, so b->L never
 * names a thread that has ended since, or one that is suspended. */
static lua_State *host_enter(policy_box *b, lua_State *L) {
  lua_State *was = b->L;
  b->L = L;
  return was;
}

static void host_leave(policy_box *b, lua_State *was) { b->L = was; }

/* The policy at 1 is busy until the calling function returns or raises:
 * a library call of it may run the script, and so opts.log, which may
 * close the policy; the close then waits for this to be over.  (A
 * to-be-closed value, so an error on the way out still ends it.)  The
 * stack is first cut to the function's nargs, so the guard sits after
 * them and never reads as a missing argument.  Never pop below the guard:
 * Lua 5.4.4's lua_settop (Debian's) keeps a stack pointer across the
 * close, which the close may move (fixed in 5.4.5); at return it is safe. */
static void busy_until_return(lua_State *L, int nargs) {
  lua_settop(L, nargs);
  policy_box *b = lua_touserdata(L, 1);
  policy_box **guard = lua_newuserdatauv(L, sizeof *guard, 0);
  *guard = b;
  luaL_setmetatable(L, BUSY_MT);
  lua_toclose(L, -1);
  b->busy++;
}

static int busy_over(lua_State *L) {
  policy_box **guard = lua_touserdata(L, 1);
  if (*guard) {
    (*guard)->busy--;
    policy_release(L, *guard);
    *guard = NULL;
  }
  return 0;
}

/* Frees the policy once it is closed, its last call is gone and no
 * library call of it is in progress; and opts.log with it, even when the
 * load failed (no policy then, but the log was taken). */
static void policy_release(lua_State *L, policy_box *b) {
  if (!b->closed || b->calls > 0 || b->busy > 0) return;
  if (b->p) {
    lua_State *was = host_enter(b, L);
    luaretry_policy_free(b->p);
    host_leave(b, was);
  }
  b->p = NULL;
  if (b->log_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, b->log_ref);
  b->log_ref = LUA_NOREF;
}

/* The call at i, and its policy's box in *pbp when pbp is not NULL. */
static luaretry_call *check_call(lua_State *L, int i, policy_box **pbp) {
  call_box *b = luaL_checkudata(L, i, CALL_MT);
  if (!b->c) luaL_error(L, "call is closed");
  if (b->busy) luaL_error(L, "the call is in use: its own callback cannot use it");
  lua_getiuservalue(L, i, 1);
  policy_box *pb = lua_touserdata(L, -1);
  if (!pb || !pb->p || pb->closed) luaL_error(L, "the call's policy is closed");
  lua_pop(L, 1);
  if (pbp) *pbp = pb;
  return b->c;
}

static int fail(lua_State *L, const char *msg, luaretry_code rc) {
  luaL_pushfail(L);
  lua_pushstring(L, msg);
  lua_pushstring(L, luaretry_strerror(rc));
  return 3;
}

static void set_num(lua_State *L, const char *k, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}

static void set_str(lua_State *L, const char *k, const char *v) {
  if (!v) return;
  lua_pushstring(L, v);
  lua_setfield(L, -2, k);
}

/* Applies opts.set and the host's limits (opts.time_limit, ...: every
 * host-only field of the library's table). */
static luaretry_code apply_options(lua_State *L, luaretry_policy *p, int opts) {
  if (lua_isnoneornil(L, opts)) return LUARETRY_OK;
  luaL_checktype(L, opts, LUA_TTABLE);
  for (size_t i = 0; i < luaretry_field_count(); i++) {
    const luaretry_field *f = luaretry_field_at(i);
    if (!f->host_only) continue;
    if (lua_getfield(L, opts, f->name) != LUA_TNIL) {
      luaretry_code rc = luaretry_policy_set(p, f->name, setting_text(L, -1, NULL));
      if (rc != LUARETRY_OK) return rc;
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  int t = lua_getfield(L, opts, "set");
  if (t != LUA_TNIL && t != LUA_TTABLE) /* ignored, its overrides would be lost */
    luaL_error(L, "opts.set: expected a table of NAME = value, got %s", lua_typename(L, t));
  if (t == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      if (lua_type(L, -2) != LUA_TSTRING) /* checkstring would name "argument #-2" */
        luaL_error(L, "opts.set: a %s key (setting names expected)", luaL_typename(L, -2));
      const char *name = lua_tostring(L, -2);
      const char *value = setting_text(L, -1, NULL);
      luaretry_code rc = luaretry_policy_set(p, name, value);
      if (rc != LUARETRY_OK) return rc;
      lua_pop(L, 2);
    }
  }
  lua_pop(L, 1);
  return LUARETRY_OK;
}

static void log_to_host(void *ud, const char *line);

static const luaretry_field *field_named(const char *name) {
  for (size_t i = 0; i < luaretry_field_count(); i++)
    if (strcmp(luaretry_field_at(i)->name, name) == 0) return luaretry_field_at(i);
  return NULL;
}

/* A name in opts that is none of set, log or a host-only field is an
 * error: a policy field put beside set = {...} would be ignored. */
static void check_option_names(lua_State *L, int opts) {
  if (!lua_istable(L, opts)) return;
  lua_pushnil(L);
  while (lua_next(L, opts)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "options: a %s key (names expected)", luaL_typename(L, -1));
    const char *name = lua_tostring(L, -1);
    const luaretry_field *f = field_named(name);
    if (strcmp(name, "set") == 0 || strcmp(name, "log") == 0 || (f && f->host_only)) continue;
    if (f)
      luaL_error(L, "options: %s is a policy field: put it in set = { [\"%s\"] = ... }", name,
                 name);
    luaL_error(L, "options: unknown option '%s' (set, log or a host-only field expected)", name);
  }
}

static int new_policy(lua_State *L, const char *path, const char *chunkname, const char *source,
                      int opts) {
  lua_settop(L, opts); /* the box must not land where opts is looked for */
  if (!lua_isnoneornil(L, opts)) luaL_checktype(L, opts, LUA_TTABLE);
  check_option_names(L, opts);
  if (lua_istable(L, opts)) { /* a log that is no function would be ignored */
    int t = lua_getfield(L, opts, "log");
    if (t != LUA_TNIL && t != LUA_TFUNCTION)
      luaL_error(L, "opts.log: expected a function, got %s", lua_typename(L, t));
    lua_pop(L, 1);
  }
  policy_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->p = NULL;
  b->L = NULL;
  b->log_ref = LUA_NOREF;
  b->calls = 0;
  b->busy = 0;
  b->closed = 0;
  luaL_setmetatable(L, POLICY_MT);
  luaretry_code rc = luaretry_policy_new(&b->p);
  if (rc != LUARETRY_OK) return fail(L, luaretry_strerror(rc), rc);
  if (lua_istable(L, opts) && lua_getfield(L, opts, "log") == LUA_TFUNCTION) {
    b->log_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    luaretry_policy_on_log(b->p, log_to_host, b);
  } else if (lua_istable(L, opts)) {
    lua_pop(L, 1);
  }
  lua_State *was = host_enter(b, L); /* an error of opts.set leaves it: the box is garbage */
  rc = apply_options(L, b->p, opts);
  if (rc == LUARETRY_OK)
    rc = path ? luaretry_policy_load_file(b->p, path)
              : luaretry_policy_load_string(b->p, chunkname, source);
  host_leave(b, was);
  if (rc != LUARETRY_OK) {
    int n = fail(L, luaretry_policy_errmsg(b->p), rc);
    b->closed = 1;
    policy_release(L, b);
    return n;
  }
  /* The collector sees a box of some 40 bytes, not the policy's Lua
   * states (some 40 KiB): dropped policies piled up by the thousand before
   * a cycle came.  A step of their size for each keeps it in pace. */
  lua_gc(L, LUA_GCSTEP, (int)(luaretry_policy_memory(b->p) / 1024));
  return 1;
}

/* "NAME: no such file, nor in DIR, DIR, DIR": where a name was looked for. */
static int not_found(lua_State *L, const char *name) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, name);
  luaL_addstring(&b, ": no such file");
  char dir[4096];
  luaretry_code rc;
  int shown = 0; /* a folder too long to open (E_IO) is skipped */
  for (size_t i = 0; (rc = luaretry_policy_dir(i, dir, sizeof dir)) != LUARETRY_E_ARG; i++) {
    if (rc != LUARETRY_OK) continue;
    luaL_addstring(&b, shown++ ? ", " : ", nor in ");
    luaL_addstring(&b, dir);
  }
  luaL_pushresult(&b);
  return fail(L, lua_tostring(L, -1), LUARETRY_E_IO);
}

/* luaretry.load(policy [, opts]) -> policy | fail, message, error: a path,
 * or a name on the search path, as the command line takes POLICY. */
static int l_load(lua_State *L) {
  size_t name_len;
  const char *name = luaL_checklstring(L, 1, &name_len);
  if (memchr(name, '\0', name_len)) /* the library takes a C string: it would open another file */
    return fail(L, "load: the path holds a NUL byte", LUARETRY_E_IO);
  char path[8192];
  luaretry_code rc = luaretry_policy_find(name, path, sizeof path);
  /* a path (a '/' or ".lua") is the library's to report ("cannot open");
   * a bare name, where it was looked for (never the current folder) */
  size_t len = strlen(name);
  int file = strchr(name, '/') || (len >= 4 && strcmp(name + len - 4, ".lua") == 0);
  if (rc == LUARETRY_E_IO && !file) return not_found(L, name);
  return new_policy(L, rc == LUARETRY_OK ? path : name, NULL, NULL, 2);
}

/* A source with a NUL byte is refused, as Lua's load refuses one: the
 * library takes a C string, and would read the source only up to it. */
static int nul_in_source(lua_State *L, const char *fn, const char *src, size_t len) {
  const char *nul = memchr(src, '\0', len);
  lua_pushfstring(L, "%s: the source holds a NUL byte (byte %I): a policy is text", fn,
                  (lua_Integer)(nul - src) + 1);
  return fail(L, lua_tostring(L, -1), LUARETRY_E_SYNTAX);
}

/* luaretry.load_string(source [, chunkname [, opts]]) */
static int l_load_string(lua_State *L) {
  size_t len;
  const char *src = luaL_checklstring(L, 1, &len);
  const char *name = luaL_optstring(L, 2, "=policy");
  if (memchr(src, '\0', len)) return nul_in_source(L, "load_string", src, len);
  return new_policy(L, NULL, name, src, 3);
}

static int p_gc(lua_State *L) {
  policy_box *b = luaL_checkudata(L, 1, POLICY_MT);
  b->closed = 1;
  policy_release(L, b);
  return 0;
}

/* A script's print() (and hook errors) to the host's opts.log function;
 * called while the host is inside one of this module's functions. */
static void log_to_host(void *ud, const char *line) {
  policy_box *b = ud;
  lua_State *L = b->L;
  if (!L || !lua_checkstack(L, 2)) return; /* NULL: no call of ours in progress */
  lua_rawgeti(L, LUA_REGISTRYINDEX, b->log_ref);
  lua_pushstring(L, line);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) lua_pop(L, 1); /* a log must not fail a call */
}

static int p_reload(lua_State *L) {
  luaretry_policy *p = check_policy(L, 1);
  busy_until_return(L, 3);
  const char *name = luaL_checkstring(L, lua_isnoneornil(L, 3) ? 2 : 3);
  size_t len = 0;
  const char *source = lua_isnoneornil(L, 3) ? NULL : luaL_checklstring(L, 2, &len);
  if (source && memchr(source, '\0', len)) return nul_in_source(L, "reload", source, len);
  lua_State *was = host_enter(lua_touserdata(L, 1), L);
  luaretry_code rc =
    source ? luaretry_policy_load_string(p, name, source) : luaretry_policy_load_file(p, name);
  host_leave(lua_touserdata(L, 1), was);
  if (rc != LUARETRY_OK) return fail(L, luaretry_policy_errmsg(p), rc);
  lua_pushboolean(L, 1);
  return 1;
}

/* p:reload_if_changed() -> reloaded (boolean) | fail, message */
static int p_reload_if_changed(lua_State *L) {
  luaretry_policy *p = check_policy(L, 1);
  busy_until_return(L, 1);
  int reloaded = 0;
  lua_State *was = host_enter(lua_touserdata(L, 1), L);
  luaretry_code rc = luaretry_policy_reload_if_changed(p, &reloaded);
  host_leave(lua_touserdata(L, 1), was);
  if (rc != LUARETRY_OK) return fail(L, luaretry_policy_errmsg(p), rc);
  lua_pushboolean(L, reloaded);
  return 1;
}

static int p_set(lua_State *L) {
  luaretry_policy *p = check_policy(L, 1);
  busy_until_return(L, 3);
  size_t name_len, value_len;
  const char *name = luaL_checklstring(L, 2, &name_len);
  const char *value = setting_text(L, 3, &value_len);
  /* the library takes C strings: a NUL byte would set another value */
  if (memchr(name, '\0', name_len) || memchr(value, '\0', value_len))
    return fail(L, "set: the setting's name or value holds a NUL byte", LUARETRY_E_ARG);
  lua_State *was = host_enter(lua_touserdata(L, 1), L);
  luaretry_code rc = luaretry_policy_set(p, name, value);
  host_leave(lua_touserdata(L, 1), was);
  if (rc != LUARETRY_OK) return fail(L, luaretry_policy_errmsg(p), rc);
  lua_pushboolean(L, 1);
  return 1;
}

static int p_tuning(lua_State *L) {
  luaretry_policy *p = check_policy(L, 1);
  luaretry_tuning t;
  luaretry_policy_tuning(p, &t);
  lua_createtable(L, 0, 16);
  set_str(L, "name", t.name);
  set_str(L, "source", t.source);
  if (t.max_attempts) set_num(L, "max_attempts", (double)t.max_attempts);
  if (t.deadline > 0) set_num(L, "deadline", t.deadline);
  if (t.attempt_timeout > 0) set_num(L, "attempt_timeout", t.attempt_timeout);
  if (t.connect_timeout > 0) set_num(L, "connect_timeout", t.connect_timeout);
  if (t.stall_timeout > 0) set_num(L, "stall_timeout", t.stall_timeout);
  set_num(L, "stall_speed", (double)t.stall_speed);
  lua_pushboolean(L, t.retry_after);
  lua_setfield(L, -2, "retry_after");
  set_num(L, "max_retry_after", t.max_retry_after);
  set_num(L, "body_limit", (double)t.body_limit);
  set_num(L, "instruction_limit", (double)t.instruction_limit);
  set_num(L, "memory_limit", (double)t.memory_limit);
  set_num(L, "time_limit", t.time_limit);
  lua_createtable(L, 0, 8);
  set_str(L, "kind", luaretry_backoff_kind_name(t.kind));
  if (t.kind != LUARETRY_BACKOFF_SCRIPT) {
    set_num(L, "initial", t.initial);
    set_num(L, "multiplier", t.multiplier);
    set_num(L, "max", t.max);
    set_num(L, "step", t.step);
    set_str(L, "jitter", luaretry_jitter_name(t.jitter));
    set_num(L, "jitter_max", t.jitter_max);
    lua_pushboolean(L, t.cap_jitter);
    lua_setfield(L, -2, "cap_jitter");
  }
  lua_setfield(L, -2, "backoff");
  return 1;
}

static int p_warnings(lua_State *L) {
  luaretry_policy *p = check_policy(L, 1);
  size_t n = luaretry_policy_warning_count(p);
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    lua_pushstring(L, luaretry_policy_warning(p, i));
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

/* p:metrics() -> the counters, budget and breaker shared by its calls */
static int p_metrics(lua_State *L) {
  luaretry_metrics m;
  luaretry_policy *p = check_policy(L, 1);
  busy_until_return(L, 1); /* as any call that may tell a line */
  lua_State *was = host_enter(lua_touserdata(L, 1), L);
  luaretry_policy_metrics(p, &m);
  double rate = luaretry_policy_rate(p);
  host_leave(lua_touserdata(L, 1), was);
  lua_createtable(L, 0, 16);
  const struct {
    const char *name;
    uint64_t v;
  } counts[] = {
    { "calls", m.calls },
    { "attempts", m.attempts },
    { "retries", m.retries },
    { "successes", m.successes },
    { "finals", m.finals },
    { "exhausted", m.exhausted },
    { "deadline_stops", m.deadline_stops },
    { "policy_errors", m.policy_errors },
    { "cancelled", m.cancelled },
    { "budget_refusals", m.budget_refusals },
    { "circuit_refusals", m.circuit_refusals },
    { "breaker_openings", m.breaker_openings },
    { "hedges", m.hedges },
    { "hedges_won", m.hedges_won },
    { "hedges_cancelled", m.hedges_cancelled },
    { "throttled", m.throttled },
    { "admission_refusals", m.admission_refusals },
    { "rate_limited", m.rate_limited },
    { "fleet_round_trips", m.fleet_round_trips },
  };
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    lua_pushinteger(L, (lua_Integer)counts[i].v);
    lua_setfield(L, -2, counts[i].name);
  }
  set_num(L, "time_waited", m.time_waited);
  set_num(L, "budget_tokens", m.budget_tokens);
  set_num(L, "rate", rate);
  set_str(L, "breaker", luaretry_breaker_state_name(m.breaker));
  set_str(L, "guards", luaretry_guards_scope_name(m.guards));
  return 1;
}

/* p:fleet_sync() -> true | fail, message: one round trip with the fleet */
static int p_fleet_sync(lua_State *L) {
  luaretry_policy *p = check_policy(L, 1);
  busy_until_return(L, 1); /* the fleet's log may run opts.log */
  lua_State *was = host_enter(lua_touserdata(L, 1), L);
  luaretry_code rc = luaretry_policy_fleet_sync(p);
  host_leave(lua_touserdata(L, 1), was);
  if (rc != LUARETRY_OK) return fail(L, luaretry_policy_errmsg(p), rc);
  lua_pushboolean(L, 1);
  return 1;
}

/* The table p:fleet() returns, made under protection: the status's
 * process list is freed whatever happens (lua_pcall of this). */
static int push_fleet_status(lua_State *L) {
  const luaretry_fleet_status *st = lua_touserdata(L, 1);
  lua_createtable(L, 0, 19);
  lua_pushboolean(L, st->exists);
  lua_setfield(L, -2, "exists");
  set_num(L, "tokens", st->tokens);
  set_num(L, "max_tokens", st->max_tokens);
  set_str(L, "breaker", luaretry_breaker_state_name(st->breaker));
  set_num(L, "consecutive_failures", (double)st->consecutive_failures);
  set_num(L, "probes_left", (double)st->probes_left);
  set_num(L, "opened_at", st->opened_at);
  set_num(L, "now", st->now);
  set_str(L, "key", st->key);
  set_str(L, "where", st->where);
  set_num(L, "window_requests", st->window_requests); /* 0 without a throttle */
  set_num(L, "window_accepts", st->window_accepts);
  set_num(L, "window_seconds", st->window_seconds);
  set_num(L, "rate_limit", st->rate_limit); /* 0 without a shared rate */
  set_num(L, "rate_ahead", st->rate_ahead);
  set_num(L, "leased_tokens", st->leased_tokens); /* the budget's blocks out */
  set_num(L, "lease_holders", (double)st->lease_holders);
  lua_createtable(L, (int)st->process_count, 0);
  for (size_t i = 0; i < st->process_count; i++) {
    lua_pushstring(L, st->processes[i].member);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "processes");
  return 1;
}

/* p:fleet() -> the fleet's state in Redis | fail, message */
static int p_fleet(lua_State *L) {
  luaretry_policy *p = check_policy(L, 1);
  busy_until_return(L, 1);
  luaretry_fleet_status st;
  lua_State *was = host_enter(lua_touserdata(L, 1), L);
  luaretry_code rc = luaretry_policy_fleet_status(p, &st);
  host_leave(lua_touserdata(L, 1), was);
  if (rc != LUARETRY_OK) return fail(L, luaretry_policy_errmsg(p), rc);
  lua_pushcfunction(L, push_fleet_status);
  lua_pushlightuserdata(L, &st);
  int status = lua_pcall(L, 1, 1, 0);
  luaretry_fleet_status_free(&st);
  if (status != LUA_OK) return lua_error(L);
  return 1;
}

static int p_memory(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)luaretry_policy_memory(check_policy(L, 1)));
  return 1;
}

static void push_decision(lua_State *L, const luaretry_decision *d) {
  lua_createtable(L, 0, 10);
  lua_pushboolean(L, d->retry);
  lua_setfield(L, -2, "retry");
  set_str(L, "verdict", luaretry_reason_name(d->reason));
  lua_pushinteger(L, d->attempt);
  lua_setfield(L, -2, "attempt");
  set_num(L, "wait", d->wait);
  set_num(L, "next_timeout", d->next_timeout);
  set_num(L, "elapsed", d->elapsed);
  set_str(L, "source", luaretry_wait_source_name(d->wait_source));
  set_str(L, "rule", d->rule);
  set_str(L, "message", d->message);
  set_str(L, "hook_error", d->hook_error);
  if (d->throttled) { /* only when true: a decision's table stays as it was */
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "throttled");
  }
}

static int collect_decision(void *ud, const luaretry_decision *d) {
  lua_State *L = ud;
  push_decision(L, d);
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  return 0;
}

/* p:schedule{seed = N, attempts = N} -> list of decisions */
static int p_schedule(lua_State *L) {
  luaretry_policy *p = check_policy(L, 1);
  busy_until_return(L, 2);
  uint64_t seed = 1;
  long attempts = 0;
  static const char *const known[] = { "seed", "attempts", NULL };
  check_opts(L, 2, "p:schedule", known);
  if (lua_istable(L, 2)) {
    seed = (uint64_t)int_field(L, 2, "seed", 0, 1, 0);
    attempts = (long)int_field(L, 2, "attempts", 0, 0, 1);
  }
  lua_newtable(L);
  lua_State *was = host_enter(lua_touserdata(L, 1), L);
  luaretry_code rc = luaretry_simulate(p, seed, attempts, collect_decision, L);
  host_leave(lua_touserdata(L, 1), was);
  if (rc != LUARETRY_OK) return fail(L, luaretry_strerror(rc), rc);
  return 1;
}

/* p:sample{n = retry, count = N, seed = S, previous = x}: N draws of the
 * policy's backoff for retry n, through the engine's own arithmetic. */
static int p_sample(lua_State *L) {
  luaretry_policy *p = check_policy(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  static const char *const known[] = { "n", "count", "seed", "previous", NULL };
  check_opts(L, 2, "p:sample", known);
  lua_Integer n = int_field(L, 2, "n", 1, 0, 0);
  lua_Integer count = int_field(L, 2, "count", 0, 1, 1);
  uint64_t seed = (uint64_t)int_field(L, 2, "seed", 0, 1, 0);
  lua_getfield(L, 2, "previous");
  if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TNUMBER)
    luaL_error(L, "previous: a number expected, got %s", luaL_typename(L, -1));
  double previous = lua_isnil(L, -1) ? -1 : lua_tonumber(L, -1);
  luaL_argcheck(L, n >= 0, 2, "n must be 0 or more");
  luaL_argcheck(L, count >= 1 && count <= 10000000, 2, "count out of range");
  luaretry_tuning t;
  luaretry_policy_tuning(p, &t);
  luaL_argcheck(L, t.kind != LUARETRY_BACKOFF_SCRIPT, 1, "the backoff is a script function");
  double *waits = lua_newuserdatauv(L, (size_t)count * sizeof *waits, 0);
  luaretry_code rc =
    luaretry_policy_sample_backoff(p, (uint64_t)n, seed, previous, waits, (size_t)count);
  if (rc != LUARETRY_OK) return fail(L, luaretry_strerror(rc), rc);
  lua_createtable(L, (int)count, 0);
  for (lua_Integer i = 1; i <= count; i++) {
    lua_pushnumber(L, waits[i - 1]);
    lua_rawseti(L, -2, i);
  }
  return 1;
}

/* ---- outcomes from Lua tables */

typedef struct {
  luaretry_outcome o;
  luaretry_header headers[64];
} outcome_buf;

/* An outcome's fields, each checked by type with a message that names it
 * ("outcome.status: expected a whole number, got string"), never Lua's
 * "bad argument #-1".  Each leaves the field's value on the stack, for
 * anchor_since. */
static int field_error(lua_State *L, const char *name, const char *want) {
  return luaL_error(L, "outcome.%s: expected %s, got %s", name, want, luaL_typename(L, -1));
}

static lua_Integer field_int(lua_State *L, int idx, const char *name, lua_Integer def,
                             lua_Integer lo, lua_Integer hi) {
  if (lua_getfield(L, idx, name) == LUA_TNIL) return def;
  int ok;
  lua_Integer v = lua_tointegerx(L, -1, &ok);
  if (!ok || lua_type(L, -1) != LUA_TNUMBER) field_error(L, name, "a whole number");
  if (v < lo || v > hi) luaL_error(L, "outcome.%s: %I out of range (%I to %I)", name, v, lo, hi);
  return v;
}

static const char *field_str(lua_State *L, int idx, const char *name, size_t *len) {
  if (lua_getfield(L, idx, name) == LUA_TNIL) return NULL;
  if (lua_type(L, -1) != LUA_TSTRING) field_error(L, name, "a string");
  return lua_tolstring(L, -1, len);
}

static double field_num(lua_State *L, int idx, const char *name, double def) {
  if (lua_getfield(L, idx, name) == LUA_TNIL) return def;
  if (lua_type(L, -1) != LUA_TNUMBER) field_error(L, name, "a number of seconds");
  return lua_tonumber(L, -1);
}

/* The first Retry-After among the headers that reads as a wait, as the
 * curl helper and testing.run read it; -1 when none. */
static double headers_retry_after(const luaretry_outcome *o) {
  for (size_t i = 0; i < o->header_count; i++) {
    const char *n = o->headers[i].name;
    if (strlen(n) != 11) continue;
    char low[12];
    for (int k = 0; k < 11; k++) low[k] = (char)(n[k] >= 'A' && n[k] <= 'Z' ? n[k] + 32 : n[k]);
    low[11] = '\0';
    if (strcmp(low, "retry-after") != 0) continue;
    double w;
    if (luaretry_retry_after(o->headers[i].value, 0, &w) == LUARETRY_OK) return w;
  }
  return -1;
}

/* The string at idx, whole: one with a NUL byte is an error naming `what`
 * (the library takes a C string, and would read it only up to the NUL). */
static const char *whole_string(lua_State *L, int idx, const char *what, const char *name) {
  size_t len;
  const char *s = lua_tolstring(L, idx, &len);
  if (!memchr(s, '\0', len)) return s;
  if (!name) luaL_error(L, "%s: a header name holds a NUL byte (it would be read up to it)", what);
  luaL_error(L, "%s[\"%s\"]: the value holds a NUL byte (it would be read up to it)", what, name);
  return NULL;
}

/* The name = value strings of the table at the top, every one: into
 * `small` when they fit, else into a block pushed above the table (kept
 * by the caller's anchor_since, as the strings are by the table).  Any
 * other pair is an error that names it: a header dropped without a word
 * would be a setting silently ignored. */
static luaretry_header *read_header_table(lua_State *L, const char *what, luaretry_header *small,
                                          size_t room, size_t *count) {
  int t = lua_gettop(L);
  size_t n = 0;
  char where[32];
  snprintf(where, sizeof where, "%s.headers", what);
  for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1), n++) {
    if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "%s.headers: expected name = value strings, got %s = %s", what,
                 luaL_typename(L, -2), luaL_typename(L, -1));
    whole_string(L, -1, where, whole_string(L, -2, where, NULL));
  }
  luaretry_header *h = n <= room ? small : lua_newuserdatauv(L, n * sizeof *h, 0);
  size_t i = 0;
  for (lua_pushnil(L); i < n && lua_next(L, t); lua_pop(L, 1), i++)
    h[i] = (luaretry_header){ lua_tostring(L, -2), lua_tostring(L, -1) };
  *count = i;
  return h;
}

static void read_headers(lua_State *L, int idx, outcome_buf *ob) {
  luaretry_outcome *o = &ob->o;
  int t = lua_getfield(L, idx, "headers");
  if (t == LUA_TNIL) return;
  if (t != LUA_TTABLE) field_error(L, "headers", "a table of name = value strings");
  o->headers = read_header_table(L, "outcome", ob->headers, 64, &o->header_count);
}

/* The values pushed since top, put in one table left at top + 1 in their
 * place: the strings read from them live as long as it does.  The table
 * they were read from need not hold them (a field from __index is a
 * string nothing else holds, a number read as a string another), so its
 * caller keeps this on the stack until the engine is done with them. */
static void anchor_since(lua_State *L, int top) {
  int n = lua_gettop(L) - top;
  lua_createtable(L, n, 0);
  for (int i = 1; i <= n; i++) {
    lua_pushvalue(L, top + i);
    lua_rawseti(L, -2, i);
  }
  if (n > 0) lua_replace(L, top + 1);
  lua_settop(L, top + 1);
}

/* Reads a table at `idx` into *ob, and leaves the anchor of its strings
 * (anchor_since) at the top.  Without a retry_after field, a Retry-After
 * header sets it, as it does for the engine's other readers. */
static void read_outcome(lua_State *L, int idx, outcome_buf *ob) {
  luaretry_outcome *o = &ob->o;
  luaretry_outcome_init(o);
  idx = lua_absindex(L, idx);
  luaL_checkstack(L, 16, "outcome"); /* a value a field, and the headers' */
  int top = lua_gettop(L);
  if (!lua_istable(L, idx))
    luaL_error(L, "outcome: expected a table, got %s", luaL_typename(L, idx));
  o->status = (int)field_int(L, idx, "status", 0, 0, 999);
  o->body = field_str(L, idx, "body", &o->body_len);
  o->error = field_str(L, idx, "error", NULL);
  o->error_detail = field_str(L, idx, "error_detail", NULL);
  o->method = field_str(L, idx, "method", NULL);
  o->url = field_str(L, idx, "url", NULL);
  o->retry_after = field_num(L, idx, "retry_after", -1);
  int has_retry_after = !lua_isnil(L, -1);
  lua_getfield(L, idx, "workflow");
  o->workflow = lua_toboolean(L, -1);
  lua_getfield(L, idx, "not_repeatable");
  o->not_repeatable = lua_toboolean(L, -1);
  const char *kind = field_str(L, idx, "kind", NULL);
  if (kind && strcmp(kind, "http") != 0 && strcmp(kind, "command") != 0)
    luaL_error(L, "outcome.kind: expected \"http\" or \"command\", got \"%s\"", kind);
  o->kind = kind && strcmp(kind, "command") == 0 ? LUARETRY_OUTCOME_COMMAND : LUARETRY_OUTCOME_HTTP;
  read_headers(L, idx, ob);
  if (!has_retry_after) o->retry_after = headers_retry_after(o);
  anchor_since(L, top);
}

/* A header table's value at the top: a string, or a number read as one
 * (an integral one as an integer: 5000.0 is "5000"), which the anchor
 * table at `anchor` keeps (0: only counting); NULL for anything else. */
static const char *header_value(lua_State *L, int anchor, const char *what, const char *name) {
  int t = lua_type(L, -1);
  if (t == LUA_TSTRING) return whole_string(L, -1, what, name);
  if (t != LUA_TNUMBER) return NULL;
  if (!anchor) return "";
  int whole;
  lua_Integer i = lua_tointegerx(L, -1, &whole);
  if (whole)
    lua_pushfstring(L, "%I", i);
  else
    lua_pushvalue(L, -1);
  const char *v = lua_tostring(L, -1); /* the copy made a string in place */
  lua_rawseti(L, anchor, (lua_Integer)lua_rawlen(L, anchor) + 1);
  return v;
}

/* The values of a {name = value or {value, ...}} table at t, in order
 * within a name, into h (counted only when h is NULL): every one is read,
 * since of repeated inbound headers the smallest counts.  A value is a
 * string or a number (`{["Luaretry-Retries"] = 0}`); anything else is an
 * error naming it, never a header silently left out.  The strings stay
 * referenced by the table, a number's by the table at `anchor`; the
 * caller keeps both on the stack. */
static size_t header_values(lua_State *L, const char *what, int t, luaretry_header *h, int anchor) {
  size_t n = 0;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      luaL_error(L, "%s: a %s key (header names expected)", what, luaL_typename(L, -2));
    const char *name = whole_string(L, -2, what, NULL);
    const char *v = header_value(L, h ? anchor : 0, what, name);
    if (v) {
      if (h) h[n] = (luaretry_header){ name, v };
      n++;
    } else if (lua_type(L, -1) == LUA_TTABLE) {
      for (lua_Integer i = 1; lua_rawgeti(L, -1, i) != LUA_TNIL; i++, n++) {
        if (!(v = header_value(L, h ? anchor : 0, what, name)))
          luaL_error(L, "%s[\"%s\"][%I]: a string or a number expected, got %s", what, name, i,
                     luaL_typename(L, -1));
        if (h) h[n] = (luaretry_header){ name, v };
        lua_pop(L, 1);
      }
      lua_pop(L, 1); /* the nil that ended the list */
    } else {
      luaL_error(L, "%s[\"%s\"]: a string, a number or a list of them expected, got %s", what, name,
                 luaL_typename(L, -1));
    }
    lua_pop(L, 1);
  }
  return n;
}

/* {retries =, inbound = {name = value or {values}}}: what the request a
 * Lua host serves carried (luaretry_call_options_inbound), and a number
 * of retries of its own; both only ever lower what is there. */
static int call_allowance(lua_State *L, int idx, luaretry_policy *p, luaretry_call_options *opt) {
  if (lua_getfield(L, idx, "retries") != LUA_TNIL) {
    lua_Integer n = int_field(L, idx, "retries", 1, 0, 0);
    luaL_argcheck(L, n >= 0 && n <= UINT32_MAX, idx, "retries: 0 or more expected");
    opt->flags |= LUARETRY_CALL_RETRIES;
    opt->retries = (uint32_t)n;
  }
  if (lua_getfield(L, idx, "inbound") == LUA_TNIL) {
    lua_pop(L, 2);
    return 0;
  }
  if (!lua_istable(L, -1)) /* checktype would name "argument #-2" */
    luaL_error(L, "inbound: a table of the headers received expected, got %s",
               luaL_typename(L, -1));
  int t = lua_absindex(L, -1);
  size_t n = header_values(L, "inbound", t, NULL, 0);
  luaretry_header *h = n ? lua_newuserdatauv(L, n * sizeof *h, 0) : NULL;
  lua_newtable(L); /* the numbers' strings */
  header_values(L, "inbound", t, h, lua_gettop(L));
  luaretry_code rc = luaretry_call_options_inbound(p, h, n, opt);
  lua_settop(L, t - 2);     /* retries, inbound, the values' block and strings */
  return rc != LUARETRY_OK; /* garbage: ignored, and p:begin says so */
}

static luaretry_call_options call_options(lua_State *L, int idx, const char *fn, luaretry_policy *p,
                                          int *garbage) {
  static const char *const known[] = { "seed",    "virtual", "isolated", "deadline",
                                       "retries", "inbound", NULL };
  check_opts(L, idx, fn, known);
  luaretry_call_options opt;
  luaretry_call_options_init(&opt);
  *garbage = 0;
  if (!lua_istable(L, idx)) return opt;
  if (lua_getfield(L, idx, "seed") != LUA_TNIL) {
    opt.flags |= LUARETRY_CALL_SEED;
    opt.seed = (uint64_t)int_field(L, idx, "seed", 1, 0, 0);
  }
  if (lua_getfield(L, idx, "virtual") != LUA_TNIL && lua_toboolean(L, -1))
    opt.flags |= LUARETRY_CALL_VIRTUAL_TIME;
  if (lua_getfield(L, idx, "isolated") != LUA_TNIL && lua_toboolean(L, -1))
    opt.flags |= LUARETRY_CALL_ISOLATED;
  /* the call's own deadline, on luaretry.clock(): NaN or one passed ends
   * the call at once (as in C), a value that is no number is an error */
  if (lua_getfield(L, idx, "deadline") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TNUMBER)
      luaL_error(L,
                 "deadline: a time on luaretry.clock() expected (luaretry.deadline_in(s)), "
                 "got %s",
                 luaL_typename(L, -1));
    opt.flags |= LUARETRY_CALL_DEADLINE;
    opt.deadline = lua_tonumber(L, -1);
  }
  lua_pop(L, 4);
  *garbage = call_allowance(L, idx, p, &opt);
  return opt;
}

/* ---- requests from Lua tables and back */

typedef struct {
  luaretry_request r;
  luaretry_header headers[64];
} request_buf;

/* Reads {method =, url =, headers =, body =} at idx, and leaves the anchor
 * of its strings (anchor_since) at the top. */
/* request.NAME as a string (a number read as one) left on the stack, or
 * def when it is nil; the error names the field (optstring's would say
 * "bad argument #-2"). */
static const char *request_string(lua_State *L, int idx, const char *name, const char *def,
                                  size_t *len) {
  int t = lua_getfield(L, idx, name);
  if (t == LUA_TNIL) return def;
  if (t != LUA_TSTRING && t != LUA_TNUMBER)
    luaL_error(L, "request.%s: expected a string, got %s", name, luaL_typename(L, -1));
  return lua_tolstring(L, -1, len);
}

static void read_request(lua_State *L, int idx, request_buf *rb) {
  idx = lua_absindex(L, idx);
  luaL_checktype(L, idx, LUA_TTABLE);
  luaL_checkstack(L, 8, "request");
  int top = lua_gettop(L);
  memset(&rb->r, 0, sizeof rb->r);
  rb->r.headers = rb->headers;
  rb->r.method = request_string(L, idx, "method", "GET", NULL);
  rb->r.url = request_string(L, idx, "url", "", NULL);
  rb->r.body = request_string(L, idx, "body", NULL, &rb->r.body_len);
  int t = lua_getfield(L, idx, "headers");
  if (t == LUA_TTABLE)
    rb->r.headers = read_header_table(L, "request", rb->headers, 64, &rb->r.header_count);
  else if (t != LUA_TNIL)
    luaL_error(L, "request.headers: expected a table of name = value strings, got %s",
               luaL_typename(L, -1));
  anchor_since(L, top);
}

static void push_request(lua_State *L, const luaretry_request *r) {
  lua_createtable(L, 0, 4);
  set_str(L, "method", r->method);
  set_str(L, "url", r->url);
  if (r->body) {
    lua_pushlstring(L, r->body, r->body_len);
    lua_setfield(L, -2, "body");
  }
  lua_createtable(L, 0, (int)r->header_count);
  for (size_t i = 0; i < r->header_count; i++) {
    lua_pushstring(L, r->headers[i].value);
    lua_setfield(L, -2, r->headers[i].name);
  }
  lua_setfield(L, -2, "headers");
}

/* p:classify(outcome) -> the decision on that outcome as a first attempt */
static int p_classify(lua_State *L) {
  luaretry_policy *p = check_policy(L, 1);
  busy_until_return(L, 2);
  outcome_buf ob;
  read_outcome(L, 2, &ob);
  luaretry_call_options opt = {
    .flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME | LUARETRY_CALL_ISOLATED, .seed = 1
  };
  luaretry_call *c;
  luaretry_decision d;
  lua_State *was = host_enter(lua_touserdata(L, 1), L);
  luaretry_code rc = luaretry_call_begin(p, &opt, &c); /* a probe: counts nowhere */
  if (rc == LUARETRY_OK) {
    rc = luaretry_call_report(c, &ob.o, &d);
    if (rc == LUARETRY_OK) push_decision(L, &d); /* its strings are the call's */
    luaretry_call_free(c);
  }
  host_leave(lua_touserdata(L, 1), was);
  if (rc != LUARETRY_OK) return fail(L, luaretry_strerror(rc), rc);
  return 1;
}

/* p:is_idempotent{method =, url =, headers =, body =} -> boolean: the
 * script's is_idempotent(request), or the method rule. */
static int p_is_idempotent(lua_State *L) {
  luaretry_policy *p = check_policy(L, 1);
  busy_until_return(L, 2);
  request_buf rb;
  read_request(L, 2, &rb);
  int yes = 0;
  lua_State *was = host_enter(lua_touserdata(L, 1), L);
  luaretry_code rc = luaretry_policy_is_idempotent(p, &rb.r, &yes);
  host_leave(lua_touserdata(L, 1), was);
  if (rc != LUARETRY_OK) return fail(L, luaretry_policy_errmsg(p), rc);
  lua_pushboolean(L, yes);
  return 1;
}

/* ---- calls */

/* p:begin{seed =, virtual =, isolated =, deadline =, retries =, inbound =}
 * -> call [, what of inbound was ignored] */
static int p_begin(lua_State *L) {
  luaretry_policy *p = check_policy(L, 1);
  busy_until_return(L, 2); /* a fleet's line told here runs opts.log */
  int garbage;
  luaretry_call_options opt = call_options(L, 2, "p:begin", p, &garbage);
  call_box *b = lua_newuserdatauv(L, sizeof *b, 1);
  b->c = NULL;
  b->busy = 0;
  luaL_setmetatable(L, CALL_MT);
  lua_pushvalue(L, 1); /* the policy outlives its calls */
  lua_setiuservalue(L, -2, 1);
  lua_State *was = host_enter(lua_touserdata(L, 1), L);
  luaretry_code rc = luaretry_call_begin(p, &opt, &b->c);
  host_leave(lua_touserdata(L, 1), was);
  if (rc != LUARETRY_OK) return fail(L, luaretry_strerror(rc), rc);
  ((policy_box *)lua_touserdata(L, 1))->calls++;
  if (!garbage) return 1;
  lua_pushliteral(L, "inbound: a deadline or retries header that does not read was ignored");
  return 2;
}

static int c_gc(lua_State *L) {
  call_box *b = luaL_checkudata(L, 1, CALL_MT);
  if (!b->c) return 0;
  if (b->busy) return luaL_error(L, "the call is in use: its own callback cannot close it");
  lua_getiuservalue(L, 1, 1);
  policy_box *pb = lua_touserdata(L, -1);
  lua_State *was = pb ? host_enter(pb, L) : NULL;
  luaretry_call_free(b->c);
  if (pb) host_leave(pb, was);
  b->c = NULL;
  if (pb) {
    pb->calls--;
    policy_release(L, pb);
  }
  return 0;
}

static int c_report(lua_State *L) {
  policy_box *pb;
  luaretry_call *c = check_call(L, 1, &pb);
  outcome_buf ob;
  read_outcome(L, 2, &ob);
  luaretry_decision d;
  call_box *cb = lua_touserdata(L, 1);
  cb->busy = 1;
  lua_State *was = host_enter(pb, L);
  luaretry_code rc = luaretry_call_report(c, &ob.o, &d);
  host_leave(pb, was);
  cb->busy = 0;
  if (rc != LUARETRY_OK) return fail(L, luaretry_call_errmsg(c), rc);
  push_decision(L, &d);
  return 1;
}

/* c:next() -> a decision: retry = true (attempt now), or why it stopped */
static int c_next(lua_State *L) {
  luaretry_decision d;
  policy_box *pb;
  luaretry_call *c = check_call(L, 1, &pb);
  call_box *cb = lua_touserdata(L, 1);
  cb->busy = 1; /* a breaker's change runs on_breaker, and so opts.log */
  lua_State *was = host_enter(pb, L);
  luaretry_code rc = luaretry_call_next(c, &d);
  host_leave(pb, was);
  cb->busy = 0;
  if (rc != LUARETRY_OK) return fail(L, luaretry_strerror(rc), rc);
  push_decision(L, &d);
  return 1;
}

static int c_timeout(lua_State *L) {
  lua_pushnumber(L, luaretry_call_timeout(check_call(L, 1, NULL)));
  return 1;
}

static int c_elapsed(lua_State *L) {
  lua_pushnumber(L, luaretry_call_elapsed(check_call(L, 1, NULL)));
  return 1;
}

static int c_wait(lua_State *L) {
  policy_box *pb;
  luaretry_call *c = check_call(L, 1, &pb);
  double seconds = luaL_checknumber(L, 2);
  lua_State *was = host_enter(pb, L);
  luaretry_code rc = luaretry_call_wait(c, seconds);
  host_leave(pb, was);
  if (rc != LUARETRY_OK)
    return fail(L, rc == LUARETRY_E_ARG ? luaretry_call_errmsg(c) : luaretry_strerror(rc), rc);
  lua_pushboolean(L, 1);
  return 1;
}

/* c:is_idempotent(request) -> boolean: the script's rule, in the call */
static int c_is_idempotent(lua_State *L) {
  policy_box *pb;
  luaretry_call *c = check_call(L, 1, &pb);
  request_buf rb;
  read_request(L, 2, &rb);
  int yes = 0;
  call_box *cb = lua_touserdata(L, 1);
  cb->busy = 1; /* the script's print runs opts.log, which must not close the call */
  lua_State *was = host_enter(pb, L);
  luaretry_code rc = luaretry_call_is_idempotent(c, &rb.r, &yes);
  host_leave(pb, was);
  cb->busy = 0;
  if (rc != LUARETRY_OK) return fail(L, luaretry_call_errmsg(c), rc);
  lua_pushboolean(L, yes);
  return 1;
}

/* c:prepare(request, attempt) -> the request to send (the script's
 * prepare, with the call's info.call) */
static int c_prepare(lua_State *L) {
  policy_box *pb;
  luaretry_call *c = check_call(L, 1, &pb);
  /* checked before the call is marked busy: an error here must not leave it so */
  lua_Integer attempt = luaL_optinteger(L, 3, 1);
  luaL_argcheck(L, attempt >= 1 && attempt <= INT_MAX, 3, "attempt: 1 or more expected");
  lua_settop(L, 2); /* read_request's anchor goes after the arguments */
  request_buf rb;
  read_request(L, 2, &rb);
  luaretry_request out;
  call_box *cb = lua_touserdata(L, 1);
  cb->busy = 1;
  lua_State *was = host_enter(pb, L);
  luaretry_code rc = luaretry_call_prepare(c, &rb.r, (int)attempt, &out);
  host_leave(pb, was);
  cb->busy = 0;
  if (rc != LUARETRY_OK) return fail(L, luaretry_call_errmsg(c), rc);
  push_request(L, &out);
  return 1;
}

/* c:invocation_id() -> the call's UUID, the same for all its attempts */
static int c_invocation_id(lua_State *L) {
  lua_pushstring(L, luaretry_call_invocation_id(check_call(L, 1, NULL)));
  return 1;
}

static int c_cancel(lua_State *L) {
  policy_box *pb;
  luaretry_call *c = check_call(L, 1, &pb);
  lua_State *was = host_enter(pb, L);
  luaretry_call_cancel(c);
  host_leave(pb, was);
  return 0;
}

/* p:run(fn [, opts]): fn(attempt, timeout) returns an outcome table, or
 * status [, body [, headers]]; the result says how the call ended. */
typedef struct {
  lua_State *L;
  int fn, base;
  outcome_buf ob;
  int failed;
} run_ctx;

/* fn's results as an outcome table at the top: a table as it is, or an
 * integer status from 0 to 999, an optional body and optional headers;
 * anything else is an error, never a guess. */
static void result_table(lua_State *L, int first) {
  if (lua_istable(L, first)) {
    lua_pushvalue(L, first);
    return;
  }
  int isint;
  lua_Integer status = lua_tointegerx(L, first, &isint);
  int body_type = lua_type(L, first + 1), headers_type = lua_type(L, first + 2);
  if (!isint || lua_type(L, first) != LUA_TNUMBER || status < 0 || status > 999 ||
      (body_type != LUA_TNIL && body_type != LUA_TSTRING) ||
      (headers_type != LUA_TNIL && headers_type != LUA_TTABLE))
    luaL_error(L,
               "p:run: the function returned %s%s, %s and %s (expected an outcome table, "
               "or a status from 0 to 999, a body and headers)",
               luaL_typename(L, first),
               isint && lua_type(L, first) == LUA_TNUMBER && (status < 0 || status > 999)
                 ? " out of range"
                 : "",
               luaL_typename(L, first + 1), luaL_typename(L, first + 2));
  lua_createtable(L, 0, 3);
  lua_pushvalue(L, first);
  lua_setfield(L, -2, "status");
  lua_pushvalue(L, first + 1);
  lua_setfield(L, -2, "body");
  lua_pushvalue(L, first + 2);
  lua_setfield(L, -2, "headers");
}

/* Under lua_pcall: (ctx, fn, attempt, timeout) -> the anchor of the
 * outcome's strings, the outcome read into ctx->ob.  fn's own error goes
 * through as it was. */
static int attempt_protected(lua_State *L) {
  run_ctx *rc = lua_touserdata(L, 1);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 3);
  lua_pushvalue(L, 4);
  lua_call(L, 2, 3); /* 5, 6, 7 */
  result_table(L, 5);
  read_outcome(L, -1, &rc->ob);
  return 1;
}

static luaretry_code run_op(void *ud, luaretry_call *c, int attempt, double timeout,
                            luaretry_outcome *out) {
  (void)c;
  run_ctx *rc = ud;
  lua_State *L = rc->L;
  lua_settop(L, rc->base); /* drop the previous attempt's values */
  lua_pushcfunction(L, attempt_protected);
  lua_pushlightuserdata(L, rc);
  lua_pushvalue(L, rc->fn);
  lua_pushinteger(L, attempt);
  lua_pushnumber(L, timeout);
  /* no Lua error may cross the library's frames: caught here, raised by p_run */
  if (lua_pcall(L, 4, 1, 0) != LUA_OK) {
    rc->failed = 1;
    return LUARETRY_E_OPERATION;
  }
  *out = rc->ob.o; /* the anchor at the top keeps its strings until the next attempt */
  return LUARETRY_OK;
}

static int p_run(lua_State *L) {
  luaretry_policy *p = check_policy(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  int garbage; /* p:run has no second value to say it in: p:begin does */
  luaretry_call_options opt = call_options(L, 3, "p:run", p, &garbage);
  busy_until_return(L, 3); /* 4 */
  /* 5: the call, kept in a box so an error still frees it */
  call_box *b = lua_newuserdatauv(L, sizeof *b, 1);
  b->c = NULL;
  b->busy = 0;
  luaL_setmetatable(L, CALL_MT);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  policy_box *pb = lua_touserdata(L, 1);
  lua_State *was = host_enter(pb, L);
  luaretry_code code = luaretry_call_begin(p, &opt, &b->c);
  host_leave(pb, was);
  if (code != LUARETRY_OK) return fail(L, luaretry_strerror(code), code);
  ((policy_box *)lua_touserdata(L, 1))->calls++;
  run_ctx *rc = lua_newuserdatauv(L, sizeof *rc, 0); /* 6 */
  rc->L = L;
  rc->fn = 2;
  rc->base = 6;
  rc->failed = 0;
  luaretry_decision d;
  b->busy = 1;
  was = host_enter(pb, L);
  code = luaretry_call_run(b->c, run_op, rc, &d);
  host_leave(pb, was);
  b->busy = 0;
  if (rc->failed) return lua_error(L); /* fn's own error, as it was */
  lua_settop(L, 6);
  push_decision(L, &d);
  return 1;
}

static const luaL_Reg policy_methods[] = { { "reload", p_reload },
                                           { "reload_if_changed", p_reload_if_changed },
                                           { "set", p_set },
                                           { "tuning", p_tuning },
                                           { "warnings", p_warnings },
                                           { "memory", p_memory },
                                           { "metrics", p_metrics },
                                           { "schedule", p_schedule },
                                           { "sample", p_sample },
                                           { "classify", p_classify },
                                           { "begin", p_begin },
                                           { "run", p_run },
                                           { "is_idempotent", p_is_idempotent },
                                           { "close", p_gc },
                                           { "fleet_sync", p_fleet_sync },
                                           { "fleet", p_fleet },
                                           { NULL, NULL } };

static const luaL_Reg call_methods[] = { { "report", c_report },
                                         { "next", c_next },
                                         { "invocation_id", c_invocation_id },
                                         { "timeout", c_timeout },
                                         { "elapsed", c_elapsed },
                                         { "wait", c_wait },
                                         { "cancel", c_cancel },
                                         { "close", c_gc },
                                         { "is_idempotent", c_is_idempotent },
                                         { "prepare", c_prepare },
                                         { NULL, NULL } };

/* luaretry.retry_after(value [, now]) -> seconds, or nil: the engine's
 * Retry-After reader (now: seconds since the epoch, default the clock's) */
static int l_retry_after(lua_State *L) {
  size_t len;
  const char *v = luaL_checklstring(L, 1, &len);
  double now = luaL_optnumber(L, 2, 0); /* 0: the wall clock */
  double w;
  /* a NUL: not a wait (it would be read up to it) */
  if (memchr(v, '\0', len) || luaretry_retry_after(v, now, &w) != LUARETRY_OK) return 0;
  lua_pushnumber(L, w);
  return 1;
}

/* luaretry.rate_limit(headers [, now]) -> seconds, or nil: the engine's
 * reader of the rate-limit fields over {name = value} or {name = {value,
 * ...}} (several values of one name in order). */
static int l_rate_limit(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  double now = luaL_optnumber(L, 2, 0);
  lua_settop(L, 1);
  size_t n = header_values(L, "rate_limit", 1, NULL, 0);
  luaretry_header *h = n ? lua_newuserdatauv(L, n * sizeof *h, 0) : NULL;
  lua_newtable(L); /* the numbers' strings */
  header_values(L, "rate_limit", 1, h, lua_gettop(L));
  double w;
  luaretry_rate_limit(h, n, now, &w);
  if (w < 0) return 0;
  lua_pushnumber(L, w);
  return 1;
}

/* luaretry.clock() -> seconds on the monotonic clock, which a call's
 * deadline is on; luaretry.deadline_in(s) -> that clock + s. */
static int l_clock(lua_State *L) {
  lua_pushnumber(L, luaretry_clock_now());
  return 1;
}

static int l_deadline_in(lua_State *L) {
  lua_pushnumber(L, luaretry_deadline_in(luaL_checknumber(L, 1)));
  return 1;
}

static const luaL_Reg functions[] = { { "load", l_load },
                                      { "clock", l_clock },
                                      { "deadline_in", l_deadline_in },
                                      { "load_string", l_load_string },
                                      { "retry_after", l_retry_after },
                                      { "rate_limit", l_rate_limit },
                                      { NULL, NULL } };

static void new_class(lua_State *L, const char *name, const luaL_Reg *methods, lua_CFunction gc) {
  luaL_newmetatable(L, name);
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, gc);
  lua_setfield(L, -2, "__close");
  lua_pop(L, 1);
}

LUARETRY_API int luaopen_luaretry(lua_State *L);
LUARETRY_API int luaopen_luaretry(lua_State *L) {
  new_class(L, POLICY_MT, policy_methods, p_gc);
  new_class(L, CALL_MT, call_methods, c_gc);
  luaL_newmetatable(L, BUSY_MT);
  lua_pushcfunction(L, busy_over);
  lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, busy_over);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  luaL_newlib(L, functions);
  lua_pushliteral(L, LUARETRY_VERSION);
  lua_setfield(L, -2, "version");
  return 1;
}
