/* test_guard_model.c: the engine beside its reference model.  Random
 * policies (spec/model/scenarios.lua: budget, breaker, admission, a fixed
 * rate, hedging, backoffs, Retry-After) and random calls on the virtual
 * clock (outcomes, latencies, hedges when due, 429s with hints, attempt
 * timeouts, deadlines), each step run through the public step API and
 * through spec/model/guards.lua, which checks every decision, wait
 * (within its jitter bounds) and, after each call, the budget and the
 * breaker.  GUARD_MODEL_CALLS calls (default 100,000; 10,000 under
 * AddressSanitizer), GUARD_MODEL_SEED the seed (default 1).  0 divergences,
 * or the first few with their policy and step. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "step_support.h"

#if defined(__SANITIZE_ADDRESS__)
#define DEFAULT_CALLS 10000
#else
#define DEFAULT_CALLS 100000
#endif

static lua_State *L;
static int model_ref, scen_ref;
static long divergences, calls_run, steps;
static const char *policy_text;
static long scenario;

static double scenario_start; /* the real time of the scenario's first begin */
/* The longest a begin took in this scenario: the engine reads its guard
 * clock's origin somewhere inside begin, so each of its guard times lies
 * up to that much after the model's (a busy machine preempts us there). */
static double scenario_slack;

static double real_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *reason_name(const luaretry_decision *d) {
  if (d->retry) return "none";
  switch (d->reason) {
  case LUARETRY_REASON_NONE: return "none";
  case LUARETRY_REASON_THROTTLE: return "throttle"; /* admission's, whatever its spelling */
  default: return luaretry_reason_name(d->reason);
  }
}

/* The engine's answer, as the model reads it (a table on the stack). */
static void push_engine(const luaretry_decision *d, int hedged) {
  lua_createtable(L, 0, 5);
  lua_pushstring(L, reason_name(d));
  lua_setfield(L, -2, "reason");
  lua_pushnumber(L, d->retry ? d->wait : 0);
  lua_setfield(L, -2, "wait");
  lua_pushboolean(L, d->retry);
  lua_setfield(L, -2, "retry");
  lua_pushboolean(L, hedged);
  lua_setfield(L, -2, "hedged");
  lua_pushstring(L, d->message ? d->message : "");
  lua_setfield(L, -2, "why");
}

/* model:method(...) with `nargs` values pushed after the function and
 * self; 0, or 1 on a divergence (reported). */
static int trace;

static int ask(const char *method, int nargs) {
  steps++;
  if (trace) {
    fprintf(stderr, "%ld/%ld %s", scenario, calls_run, method);
    for (int i = 0; i < nargs; i++) {
      int at = -nargs + i;
      if (lua_istable(L, at)) {
        lua_getfield(L, at, "reason");
        lua_getfield(L, at - 1, "wait");
        lua_getfield(L, at - 2, "hedged");
        fprintf(stderr, " {%s %.4f%s}", lua_tostring(L, -3), lua_tonumber(L, -2),
                lua_toboolean(L, -1) ? " hedged" : "");
        lua_pop(L, 3);
      } else if (lua_type(L, at) == LUA_TNUMBER) {
        fprintf(stderr, " %.4f", lua_tonumber(L, at)); /* lua_tostring would convert it */
      } else {
        fprintf(stderr, " %s", lua_tostring(L, at));
      }
    }
    fprintf(stderr, "\n");
  }
  if (lua_pcall(L, nargs + 1, 0, 0) == LUA_OK) return 0;
  if (++divergences <= 5)
    fprintf(stderr, "divergence in scenario %ld, call %ld, %s: %s\n--- policy\n%s---\n", scenario,
            calls_run, method, lua_tostring(L, -1), policy_text);
  lua_pop(L, 1);
  return 1;
}

/* Pushes model.method and the model (self); the caller pushes the rest. */
static void method(const char *name) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, model_ref);
  lua_getfield(L, -1, name);
  lua_insert(L, -2);
}

typedef struct {
  int id;
  double finish; /* call seconds */
  int status;
  double retry_after;
} flight;

static const char *class_of(int status) {
  return status == 200   ? "success"
         : status == 404 ? "final"
         : status == 429 ? "throttled"
                         : "failure";
}

/* The scenario's next outcome: status, latency, Retry-After. */
static void outcome(int *status, double *latency, double *retry_after) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, scen_ref);
  lua_getfield(L, -1, "outcome");
  lua_call(L, 0, 3);
  *status = (int)lua_tointeger(L, -3);
  *latency = lua_tonumber(L, -2);
  *retry_after = lua_tonumber(L, -1);
  lua_pop(L, 4);
}

/* One attempt in flight from `now`, its answer drawn, cut at `timeout`. */
static flight launch(int id, double now, double timeout) {
  flight f = { id, 0, 0, -1 };
  double latency;
  outcome(&f.status, &latency, &f.retry_after);
  if (timeout > 0 && latency >= timeout) latency = timeout, f.status = 0, f.retry_after = -1;
  f.finish = now + latency;
  return f;
}

/* One call to its end; 1 on a divergence (the call is abandoned). */
static int one_call(luaretry_policy *p, uint64_t seed, int first) {
  luaretry_call_options o;
  step_options(&o, seed);
  luaretry_call *c = NULL;
  double origin = real_now();
  if (first) scenario_start = origin;
  if (luaretry_call_begin(p, &o, &c) != LUARETRY_OK) return 1;
  double took = real_now() - origin;
  if (first || took > scenario_slack) scenario_slack = took;
  luaretry_decision d;
  luaretry_call_next(c, &d);
  luaretry_decision at_begin = d;
  int refused =
    !d.retry && (d.reason == LUARETRY_REASON_CIRCUIT_OPEN || d.reason == LUARETRY_REASON_THROTTLE);
  if (!refused) at_begin.retry = 1;
  method("begin");
  push_engine(&at_begin, 0);
  lua_pushnumber(L, origin - scenario_start);
  lua_pushnumber(L, scenario_slack);
  int bad = ask("begin", 3);
  if (!bad && !refused) {
    method("next");
    lua_pushnumber(L, luaretry_call_elapsed(c));
    push_engine(&d, 0);
    bad = ask("next", 2);
  }
  flight fl[4];
  while (!bad && d.retry) {
    if (d.wait > 0) { /* a rate token's wait, or a retry's */
      luaretry_call_wait(c, d.wait);
      luaretry_call_next(c, &d);
      method("next");
      lua_pushnumber(L, luaretry_call_elapsed(c));
      push_engine(&d, 0);
      if ((bad = ask("next", 2)) || !d.retry) break;
      if (d.wait > 0) continue;
    }
    int id, n = 0;
    if (luaretry_call_start(c, &id) != LUARETRY_OK) {
      bad = 1;
      break;
    }
    double now = luaretry_call_elapsed(c);
    method("start");
    lua_pushnumber(L, now);
    if ((bad = ask("start", 1))) break;
    fl[n++] = launch(id, now, luaretry_call_timeout(c));
    /* hedges when due, while every attempt is still out */
    for (;;) {
      double in = luaretry_call_hedge_in(c), first = fl[0].finish;
      for (int i = 1; i < n; i++)
        if (fl[i].finish < first) first = fl[i].finish;
      if (in < 0 || n >= 4 || luaretry_call_elapsed(c) + in + 1e-3 >= first) break;
      luaretry_call_wait(c, in);
      luaretry_decision h;
      luaretry_call_hedge(c, &STEP_GET, &h);
      method("hedge");
      lua_pushnumber(L, luaretry_call_elapsed(c));
      push_engine(&h, h.hedge);
      if ((bad = ask("hedge", 2)) || !h.hedge) break;
      fl[n++] = launch(h.attempt, luaretry_call_elapsed(c), h.next_timeout);
    }
    /* the answers, in the order they come */
    while (!bad && n > 0) {
      int k = 0;
      for (int i = 1; i < n; i++)
        if (fl[i].finish < fl[k].finish) k = i;
      flight f = fl[k];
      fl[k] = fl[--n];
      double wait = f.finish - luaretry_call_elapsed(c);
      if (wait > 0) luaretry_call_wait(c, wait);
      luaretry_outcome out;
      luaretry_outcome_init(&out);
      out.status = f.status;
      out.error = f.status ? NULL : "timeout";
      out.retry_after = f.retry_after;
      luaretry_call_report_attempt(c, f.id, &out, &d);
      method("report");
      lua_pushinteger(L, f.id);
      lua_pushstring(L, class_of(f.status));
      lua_pushnumber(L, f.retry_after);
      lua_pushnumber(L, luaretry_call_elapsed(c));
      push_engine(&d, 0);
      bad = ask("report", 5);
      if (d.retry || d.reason != LUARETRY_REASON_NONE) break; /* decided, or over */
    }
  }
  luaretry_call_free(c);
  luaretry_metrics m;
  luaretry_policy_metrics(p, &m);
  if (!bad) {
    method("check");
    lua_pushnumber(L, m.budget_tokens);
    lua_pushstring(L, m.breaker == LUARETRY_BREAKER_OPEN        ? "open"
                      : m.breaker == LUARETRY_BREAKER_HALF_OPEN ? "half_open"
                                                                : "closed");
    bad = ask("check", 2);
  }
  return bad;
}

static int load_module(const char *path) {
  if (luaL_dofile(L, path) != LUA_OK) {
    fprintf(stderr, "%s\n", lua_tostring(L, -1));
    return LUA_NOREF;
  }
  return luaL_ref(L, LUA_REGISTRYINDEX);
}

int main(void) {
  const char *e = getenv("GUARD_MODEL_CALLS");
  long want = e ? atol(e) : DEFAULT_CALLS;
  e = getenv("GUARD_MODEL_SEED");
  long long seed = e ? atoll(e) : 1;
  trace = getenv("GUARD_MODEL_TRACE") != NULL;
  L = luaL_newstate();
  luaL_openlibs(L);
  int model_mod = load_module(LUARETRY_DATADIR "/spec/model/guards.lua");
  scen_ref = load_module(LUARETRY_DATADIR "/spec/model/scenarios.lua");
  if (!CHECK(model_mod != LUA_NOREF && scen_ref != LUA_NOREF)) return check_done();
  lua_getglobal(L, "math");
  lua_getfield(L, -1, "randomseed");
  lua_pushinteger(L, seed);
  lua_call(L, 1, 0);
  lua_pop(L, 1);
  long loads = 0;
  while (calls_run < want && divergences < 20) {
    scenario++;
    lua_rawgeti(L, LUA_REGISTRYINDEX, scen_ref);
    lua_getfield(L, -1, "policy");
    lua_call(L, 0, 2); /* text, settings */
    policy_text = lua_tostring(L, -2);
    lua_rawgeti(L, LUA_REGISTRYINDEX, model_mod);
    lua_getfield(L, -1, "new");
    lua_pushvalue(L, -3);
    lua_call(L, 1, 1);
    model_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pop(L, 1); /* the module */
    luaretry_policy *p = NULL;
    luaretry_policy_new(&p);
    /* what is tested here is not time: a busy machine (two cores shared,
     * ASan) may preempt one of its many hooks past the 0.25 s time limit */
    CHECK_CODE(luaretry_policy_set(p, "time_limit", "60"), LUARETRY_OK);
    if (!CHECK_CODE(luaretry_policy_load_string(p, "=model", policy_text), LUARETRY_OK)) {
      fprintf(stderr, "%s\n%s", luaretry_policy_errmsg(p), policy_text);
      break;
    }
    loads++;
    lua_rawgeti(L, LUA_REGISTRYINDEX, scen_ref);
    lua_getfield(L, -1, "calls");
    lua_call(L, 0, 1);
    long n = (long)lua_tointeger(L, -1);
    lua_pop(L, 2);
    for (long i = 0; i < n && calls_run < want; i++, calls_run++)
      if (one_call(p, (uint64_t)(scenario * 131 + i), i == 0)) break;
    luaretry_policy_free(p);
    luaL_unref(L, LUA_REGISTRYINDEX, model_ref);
    lua_settop(L, 0); /* the scenario's text and settings */
  }
  printf(
    "test_guard_model: seed %lld: %ld calls over %ld policies, %ld steps compared: "
    "%ld divergences\n",
    seed, calls_run, loads, steps, divergences);
  CHECK_EQ_INT((long)divergences, 0);
  lua_close(L);
  return check_done();
}
