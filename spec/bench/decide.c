/* decide.c: what one retry decision costs, what a call in flight holds,
 * and what a loaded policy holds.
 *
 *   (a)  the engine's decision with policies/http.lua's Lua is_transient
 *        (classification, backoff with jitter, deadline check), step API on
 *        the virtual clock with a fixed seed; status 503 and the same
 *        49-byte body every time (a service in trouble repeats its page);
 *   (a') the same with a different body every decision (64 in turn);
 *   (b)  the same loop with a C classifier instead of the script;
 *   (c)  a bare lua_pcall of the same is_transient in a plain Lua state
 *        (no sandbox, no limits), with the same status and body: the floor
 *        the engine is held to; (c') the same with (a')'s bodies.
 *        Both push the body with lua_pushlstring on every call: at 49
 *        bytes it is over Lua 5.4's 40-byte bound for interned strings,
 *        so each push makes a new string object (an allocation and its
 *        collection), the work the engine does for a new body;
 *   (e)  (a) with an exact instruction_limit, which puts a count hook on
 *        every instruction: what determinism costs;
 *   (f)  (b) with the guards off: the engine's own work with no guard and
 *        no Lua, what any classifier's decision costs at the least.
 * Then decisions on 1 and 2 threads sharing the policy; luaretry_call_begin
 * on a freshly loaded policy (cold) and later (warm), and the first
 * decision of a new thread (which makes that thread a Lua state); the
 * memory of calls in flight (1,000 and 100,000 begun and waiting); the
 * memory of one loaded http.lua, and of 1,000.
 *
 * (a), (a'), (c) and (c') run the same function, policies/http.lua's
 * is_transient(status, body, info), loaded from the same file (its
 * require "retry" from lua/), with the same arguments: 503, the same
 * bodies, and an info whose fields read alike (the engine's is a
 * read-only proxy, the bare loop's a plain table).
 *
 * Each timing is the best of 5 runs, interleaved; a run lasts ~60 ms.  The
 * loops on one thread are timed on that thread's CPU clock
 * (CLOCK_THREAD_CPUTIME_ID): the VM is shared, and a run that lost its CPU
 * to a neighbour for a while would otherwise count that time as the
 * loop's.  The 2-thread scaling is timed both ways: the wall clock
 * (decisions per second of both threads, what the host gets) and each
 * thread's CPU clock (what each decision costs while the other thread
 * runs beside it: a line both threads write makes every decision dearer),
 * with how much of the time both threads did run at once.
 * `make bench` builds and runs it from the top of the tree. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "luaretry.h"

#ifndef LUARETRY_DATADIR
#define LUARETRY_DATADIR "."
#endif

#define RUNS            5
#define POLICIES        1000
#define TARGET_SAME     1.20 /* issue 28: the same body */
#define TARGET_NEW      1.25 /* ... a new body each decision */
#define BODIES          64
#define TARGET_MEMORY   (64 * 1024)
#define TARGET_INFLIGHT 256 /* issue 28: a call in flight, malloc's header included */

static const char BODY[] = "<html><body>503 Service Unavailable</body></html>";
static char bodies[BODIES][sizeof BODY]; /* (a') and (c'): BODY, numbered */

static void make_bodies(void) {
  for (int i = 0; i < BODIES; i++) {
    memcpy(bodies[i], BODY, sizeof BODY);
    bodies[i][13] = (char)('A' + i % 26);
    bodies[i][14] = (char)('a' + i / 26);
  }
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* This thread's CPU time: what a loop costs, without the time a neighbour
 * on the shared VM held its CPU. */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, const char *detail) {
  fprintf(stderr, "bench_decide: %s: %s\n", what, detail);
  exit(1);
}

/* ---- the steady mix: what a user's retrying decision costs.
 *
 * A real service at a low failure rate: in each cycle of MIX_CALLS calls
 * one call's first attempt gets a 503 and its retry a 200, the others a 200
 * at once.  The budget (http.lua's and iam.lua's: 10 tokens, 0.1 back per
 * success) then always has its tokens: a failure takes one, the cycle's
 * ten successes give it back.  What is timed is the retrying decision as a
 * host makes it (luaretry_call_run does the same): report the 503, wait
 * (the virtual clock: no sleep), and luaretry_call_next before the retry
 * goes.  The rest of the cycle (begin, the first attempt's next, the 200s,
 * free) runs untimed, as the bare loop's 200s do.  Each retrying decision
 * is timed alone on CLOCK_MONOTONIC (a vDSO read: no system call); a run's
 * figure is their mean (OUTLIER_NS and over left out), the reads' own cost
 * taken off. */
#define MIX_CALLS   10
#define MIX_SAMPLES 3000 /* retrying decisions timed per run */

/* The verdict alone (luaretry_call_report: the judge, the guards asked
 * for the retry and told the outcome, the backoff), without the host's
 * step before the retry goes: decide_instr.sh shows it beside the whole. */
__attribute__((noinline)) luaretry_code engine_report(luaretry_call *c, const luaretry_outcome *o,
                                                      luaretry_decision *d) {
  return luaretry_call_report(c, o, d);
}

/* The host's step after a retry was decided: the wait, then next. */
static int engine_goes(luaretry_call *c, luaretry_decision *d) {
  luaretry_call_wait(c, d->wait);
  return luaretry_call_next(c, d) == LUARETRY_OK && d->retry;
}

/* The decision alone: a function of its own, so that callgrind's
 * --toggle-collect counts exactly it (spec/bench/decide_instr.sh). */
__attribute__((noinline)) int engine_retrying(luaretry_call *c, const luaretry_outcome *o) {
  luaretry_decision d;
  if (engine_report(c, o, &d) != LUARETRY_OK || !d.retry) return 0;
  return engine_goes(c, &d);
}

typedef struct {
  luaretry_policy *p;
  uint64_t seed;
  luaretry_outcome fail, ok;
  int vary;        /* a different body every decision */
  int report_only; /* time luaretry_call_report alone (the wait and next untimed) */
  long n;          /* bodies handed so far */
} mix_loop;

static luaretry_call *mix_begin(mix_loop *m) {
  luaretry_call_options opt;
  luaretry_call_options_init(&opt);
  opt.flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME;
  opt.seed = m->seed++;
  luaretry_call *c;
  luaretry_decision d;
  if (luaretry_call_begin(m->p, &opt, &c) != LUARETRY_OK)
    die("begin", luaretry_policy_errmsg(m->p));
  if (luaretry_call_next(c, &d) != LUARETRY_OK || !d.retry)
    die("next", d.message ? d.message : "the first attempt was refused");
  return c;
}

static void mix_succeed(mix_loop *m, luaretry_call *c) {
  luaretry_decision d;
  if (luaretry_call_report(c, &m->ok, &d) != LUARETRY_OK || d.reason != LUARETRY_REASON_SUCCESS)
    die("a 200", d.message ? d.message : luaretry_reason_name(d.reason));
  luaretry_call_free(c);
}

static void mix_init(mix_loop *m, luaretry_policy *p, int vary) {
  memset(m, 0, sizeof *m);
  m->p = p;
  m->seed = 1;
  m->vary = vary;
  luaretry_outcome_init(&m->fail);
  m->fail.status = 503;
  m->fail.body = BODY;
  m->fail.body_len = sizeof BODY - 1;
  m->fail.method = "GET";
  m->fail.url = "http://service.invalid/v1/items";
  m->ok = m->fail;
  m->ok.status = 200;
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The mean of n samples, those over OUTLIER_NS left out: a preemption
 * or a page fault, not the decision (a Lua collection step, which the
 * bare loop's strings cause, is well under it and stays in). */
#define OUTLIER_NS 50000
static double mean_kept(const uint64_t *v, long n) {
  double sum = 0;
  long kept = 0;
  for (long i = 0; i < n; i++)
    if (v[i] <= OUTLIER_NS) sum += (double)v[i], kept++;
  return kept ? sum / (double)kept : 0;
}

static uint64_t samples[MIX_SAMPLES];

/* One cycle: the retrying decision (timed into *ns when ns), the rest. */
static void mix_cycle(mix_loop *m, uint64_t *ns) {
  luaretry_call *c = mix_begin(m);
  if (m->vary) m->fail.body = bodies[m->n++ % BODIES];
  uint64_t t0 = ns ? mono_ns() : 0;
  int retried;
  if (m->report_only) {
    luaretry_decision d;
    retried = engine_report(c, &m->fail, &d) == LUARETRY_OK && d.retry;
    if (ns) *ns = mono_ns() - t0;
    retried = retried && engine_goes(c, &d);
  } else {
    retried = engine_retrying(c, &m->fail);
    if (ns) *ns = mono_ns() - t0;
  }
  if (!retried) die("the 503", "no retry: the guards refused it (the budget should have tokens)");
  mix_succeed(m, c);
  for (int k = 1; k < MIX_CALLS; k++) mix_succeed(m, mix_begin(m));
}

/* The mean of n retrying decisions, ns (the clock reads' cost not off). */
static double mix_run(mix_loop *m, long n) {
  for (long i = 0; i < n; i++) mix_cycle(m, &samples[i]);
  return mean_kept(samples, n);
}

/* ---- the baseline: a bare lua_pcall of the same function */

typedef struct {
  lua_State *L;
  int fn, info;
  int vary; /* a new body every decision, as the engine's loop */
  long n;
} bare_loop;

static void bare_init(bare_loop *b, const char *file, int vary) {
  memset(b, 0, sizeof *b);
  b->vary = vary;
  b->L = luaL_newstate();
  if (!b->L) die("luaL_newstate", "out of memory");
  lua_State *L = b->L;
  luaL_openlibs(L);
  lua_getglobal(L, "package");
  lua_pushstring(L, LUARETRY_DATADIR "/lua/?.lua");
  lua_setfield(L, -2, "path");
  lua_pop(L, 1);
  if (luaL_dofile(L, file) != LUA_OK) die("bare state", lua_tostring(L, -1));
  if (lua_getglobal(L, "is_transient") != LUA_TFUNCTION) die("bare state", "no is_transient");
  b->fn = luaL_ref(L, LUA_REGISTRYINDEX);
  /* What the engine's info offers, as a plain table made once. */
  lua_createtable(L, 0, 6);
  lua_pushinteger(L, 1);
  lua_setfield(L, -2, "attempt");
  lua_pushnumber(L, 0);
  lua_setfield(L, -2, "elapsed");
  lua_pushstring(L, "GET");
  lua_setfield(L, -2, "method");
  lua_pushstring(L, "http://service.invalid/v1/items");
  lua_setfield(L, -2, "url");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "workflow");
  lua_newtable(L);
  lua_setfield(L, -2, "headers");
  b->info = luaL_ref(L, LUA_REGISTRYINDEX);
}

/* The body's string, a function of its own so that decide_instr.sh can
 * show what the push costs within the baseline (the "same body" rows'
 * engine reuses its last string, or hands http.lua's `_` an empty one,
 * and makes none). */
__attribute__((noinline)) void bare_push_body(lua_State *L, const char *body) {
  lua_pushlstring(L, body, sizeof BODY - 1);
}

/* is_transient(status, body, info), as the engine's Lua classifier is
 * called. */
static int bare_pcall(bare_loop *b, int status, const char *body) {
  lua_State *L = b->L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, b->fn);
  lua_pushinteger(L, status);
  bare_push_body(L, body);
  lua_rawgeti(L, LUA_REGISTRYINDEX, b->info);
  if (lua_pcall(L, 3, 1, 0) != LUA_OK) die("bare pcall", lua_tostring(L, -1));
  int yes = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return yes;
}

/* The baseline of a retrying decision: a function of its own for
 * callgrind, as engine_retrying. */
__attribute__((noinline)) int bare_decision(bare_loop *b, int status, const char *body) {
  return bare_pcall(b, status, body);
}

static void bare_cycle(bare_loop *b, uint64_t *ns) {
  const char *body = b->vary ? bodies[b->n++ % BODIES] : BODY;
  uint64_t t0 = ns ? mono_ns() : 0;
  int yes = bare_decision(b, 503, body);
  if (ns) *ns = mono_ns() - t0;
  if (!yes) die("bare pcall", "is_transient(503) was not true");
  for (int k = 0; k < MIX_CALLS; k++) bare_pcall(b, 200, BODY);
}

static double bare_run(bare_loop *b, long n) {
  for (long i = 0; i < n; i++) bare_cycle(b, &samples[i]);
  return mean_kept(samples, n);
}

/* What two clock reads cost, back to back: taken off every mean. */
static double clock_cost(void) {
  for (long i = 0; i < MIX_SAMPLES; i++) {
    uint64_t t0 = mono_ns();
    samples[i] = mono_ns() - t0;
  }
  return mean_kept(samples, MIX_SAMPLES);
}

/* ---- (a) and (b) of the scaling: whole runs of the mix on threads */

typedef struct {
  mix_loop loop;
  long n;        /* cycles */
  int cpu;       /* the CPU the thread is pinned to; -1: none */
  int pinned;    /* 1 once it is */
  double cpu_ns; /* per decision (the cycle's MIX_CALLS + 1), this thread's CPU clock */
} thread_job;

static void *thread_run(void *arg) {
  thread_job *job = arg;
  if (job->cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(job->cpu, &set);
    job->pinned = pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
  }
  double t0 = cpu_now();
  for (long i = 0; i < job->n; i++) mix_cycle(&job->loop, NULL);
  job->cpu_ns = (cpu_now() - t0) * 1e9 / (double)(job->n * (MIX_CALLS + 1));
  return NULL;
}

typedef struct {
  double per_second;   /* decisions of all threads, wall clock */
  double cpu_ns;       /* the threads' mean CPU time per decision */
  double thread_ns[2]; /* each thread's (the first two) */
  double overlap;      /* CPU seconds of all threads / wall seconds: 2 if both ran all along */
  int pinned;          /* every thread ran on the CPU of cpus[] (when given) */
} scaling;

/* `threads` threads running the mix on one policy, thread i pinned to
 * cpus[i] (cpus NULL: none pinned). */
static scaling throughput(luaretry_policy *p, int threads, long n, const int *cpus) {
  thread_job jobs[8];
  pthread_t t[8];
  for (int i = 0; i < threads; i++) {
    mix_init(&jobs[i].loop, p, 0);
    jobs[i].loop.seed = (uint64_t)i * 1000003u;
    jobs[i].n = n;
    jobs[i].cpu = cpus ? cpus[i] : -1;
    jobs[i].pinned = 0;
  }
  double t0 = now();
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, thread_run, &jobs[i]);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  double elapsed = now() - t0;
  long decisions = n * (MIX_CALLS + 1);
  scaling sc = { (double)threads * (double)decisions / elapsed, 0, { 0, 0 }, 0, 1 };
  for (int i = 0; i < threads; i++) {
    sc.cpu_ns += jobs[i].cpu_ns / threads;
    if (i < 2) sc.thread_ns[i] = jobs[i].cpu_ns;
    sc.overlap += jobs[i].cpu_ns * 1e-9 * (double)decisions / elapsed;
    if (cpus && !jobs[i].pinned) sc.pinned = 0;
  }
  return sc;
}

static luaretry_class c_classify(void *ud, const luaretry_outcome *o, int attempt, double *wait) {
  (void)ud;
  (void)attempt;
  (void)wait;
  if (o->error) return LUARETRY_CLASS_TRANSIENT;
  if (o->status >= 200 && o->status <= 399) return LUARETRY_CLASS_SUCCESS;
  switch (o->status) {
  case 0:
  case 408:
  case 429:
  case 500:
  case 502:
  case 503:
  case 504: return LUARETRY_CLASS_TRANSIENT;
  }
  return LUARETRY_CLASS_FINAL;
}

/* A policy as shipped (the file's guards on), or with a setting or two. */
static luaretry_policy *load_policy(const char *file, const char *name1, const char *value1,
                                    const char *name2, const char *value2) {
  luaretry_policy *p;
  if (luaretry_policy_new(&p) != LUARETRY_OK) die("policy_new", "out of memory");
  if (luaretry_policy_load_file(p, file) != LUARETRY_OK) die(file, luaretry_policy_errmsg(p));
  if ((name1 && luaretry_policy_set(p, name1, value1) != LUARETRY_OK) ||
      (name2 && luaretry_policy_set(p, name2, value2) != LUARETRY_OK))
    die("set", luaretry_policy_errmsg(p));
  return p;
}

static luaretry_policy *load_http(int long_calls) {
  return long_calls
           ? load_policy("policies/http.lua", "max_attempts", "1000000000", "deadline", "none")
           : load_policy("policies/http.lua", NULL, NULL, NULL, NULL);
}

/* ---- memory */

static size_t resident_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long size = 0, resident = 0;
  if (!f) return 0;
  if (fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
  fclose(f);
  return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static const char *verdict(int ok) { return ok ? "ok" : "MISSED"; }

/* The rows: an engine loop beside its baseline, a bare loop (-1: none). */
typedef struct {
  const char *label, *file;
  const char *set1, *value1, *set2, *value2;
  int vary, bare, c_classifier;
  double target; /* over the baseline; 0: none */
} row;

/* The bare loops: http.lua's is_transient and iam.lua's, each with the
 * same body and a new one every decision. */
static const struct {
  const char *file;
  int vary;
} BARE[] = { { "policies/http.lua", 0 },
             { "policies/http.lua", 1 },
             { "policies/iam.lua", 0 },
             { "policies/iam.lua", 1 } };
#define BARES (int)(sizeof BARE / sizeof BARE[0])

static const row ROWS[] = {
  { "http.lua as shipped, same body", "policies/http.lua", NULL, NULL, NULL, NULL, 0, 0, 0,
    TARGET_SAME },
  { "http.lua as shipped, a new body", "policies/http.lua", NULL, NULL, NULL, NULL, 1, 1, 0,
    TARGET_NEW },
  { "iam.lua as shipped, same body", "policies/iam.lua", NULL, NULL, NULL, NULL, 0, 2, 0,
    TARGET_SAME },
  { "iam.lua as shipped, a new body", "policies/iam.lua", NULL, NULL, NULL, NULL, 1, 3, 0,
    TARGET_NEW },
  { "http.lua, guards off, same body", "policies/http.lua", "budget", "none", "rate", "none", 0, 0,
    0, 0 },
  { "(b) http.lua as shipped, C classifier", "policies/http.lua", NULL, NULL, NULL, NULL, 0, -1, 1,
    0 },
  { "(e) http.lua, exact instruction_limit", "policies/http.lua", "instruction_limit", "5000000",
    NULL, NULL, 0, 0, 0, 0 },
  { "(f) guards off, C classifier", "policies/http.lua", "budget", "none", "rate", "none", 0, -1, 1,
    0 },
};
#define ROW_COUNT (int)(sizeof ROWS / sizeof ROWS[0])

static luaretry_policy *row_policy(const row *r) {
  luaretry_policy *p = load_policy(r->file, r->set1, r->value1, r->set2, r->value2);
  if (r->c_classifier && luaretry_policy_set_classifier(p, c_classify, NULL) != LUARETRY_OK)
    die("set_classifier", luaretry_policy_errmsg(p));
  return p;
}

typedef struct {
  double engine[ROW_COUNT], report[ROW_COUNT], bare[BARES], clock;
} timings;

/* Best of RUNS interleaved runs of every loop: the lowest mean. */
static timings time_decisions(void) {
  luaretry_policy *p[ROW_COUNT];
  mix_loop m[ROW_COUNT];
  bare_loop b[BARES];
  timings t;
  for (int i = 0; i < ROW_COUNT; i++) {
    p[i] = row_policy(&ROWS[i]);
    mix_init(&m[i], p[i], ROWS[i].vary);
    mix_run(&m[i], MIX_SAMPLES / 4); /* warm: the thread's Lua state is made */
    t.engine[i] = t.report[i] = 1e300;
  }
  for (int i = 0; i < BARES; i++) {
    bare_init(&b[i], BARE[i].file, BARE[i].vary);
    bare_run(&b[i], MIX_SAMPLES / 4);
    t.bare[i] = 1e300;
  }
  t.clock = clock_cost();
  for (int r = 0; r < RUNS; r++) {
    for (int i = 0; i < ROW_COUNT; i++) {
      mix_run(&m[i], MIX_SAMPLES / 10); /* its caches warm again, untimed */
      double v = mix_run(&m[i], MIX_SAMPLES);
      if (v < t.engine[i]) t.engine[i] = v;
      m[i].report_only = 1; /* then the report alone, the same loop */
      v = mix_run(&m[i], MIX_SAMPLES);
      m[i].report_only = 0;
      if (v < t.report[i]) t.report[i] = v;
    }
    for (int i = 0; i < BARES; i++) {
      bare_run(&b[i], MIX_SAMPLES / 10);
      double v = bare_run(&b[i], MIX_SAMPLES);
      if (v < t.bare[i]) t.bare[i] = v;
    }
    double c = clock_cost();
    if (c < t.clock) t.clock = c;
  }
  for (int i = 0; i < ROW_COUNT; i++) {
    t.engine[i] -= t.clock;
    t.report[i] -= t.clock;
    luaretry_policy_free(p[i]);
  }
  for (int i = 0; i < BARES; i++) {
    t.bare[i] -= t.clock;
    lua_close(b[i].L);
  }
  return t;
}

static void print_decisions(const timings *t) {
  printf(
    "a retrying decision (report a 503, wait, next) in a steady mix: 1 call in %d fails once\n"
    "and its retry succeeds, the others succeed at once (the budget keeps its tokens);\n"
    "the mean of %d retrying decisions a run (those over %d us left out), best of %d runs,\n"
    "the clock reads' %.0f ns taken off; beside it a bare lua_pcall of the same\n"
    "is_transient(503, body, info), same mix; a %zu-byte body.  \"report\" times\n"
    "luaretry_call_report alone (the verdict), in runs of its own; the target is judged\n"
    "on the whole step (report, wait, next)\n\n",
    MIX_CALLS, MIX_SAMPLES, OUTLIER_NS / 1000, RUNS, t->clock, sizeof BODY - 1);
  printf("%-42s %10s %7s %10s %7s %10s   %s\n", "row", "report", "ratio", "+ next", "ratio", "bare",
         "target");
  for (int i = 0; i < ROW_COUNT; i++) {
    const row *r = &ROWS[i];
    if (r->bare < 0) {
      printf("%-42s %7.1f ns %7s %7.1f ns\n", r->label, t->report[i], "", t->engine[i]);
      continue;
    }
    double bare = t->bare[r->bare], ratio = t->engine[i] / bare;
    printf("%-42s %7.1f ns %6.2fx %7.1f ns %6.2fx %7.1f ns", r->label, t->report[i],
           t->report[i] / bare, t->engine[i], ratio, bare);
    if (r->target > 0)
      printf("   <= %.2fx  %s\n", r->target, verdict(ratio <= r->target));
    else
      printf("\n");
  }
  printf("%-42s %13.2fx the guards off\n", "http.lua as shipped, same body",
         t->engine[0] / t->engine[4]);
  printf("%-42s %13.2fx http.lua as shipped\n", "(e) with an exact instruction_limit",
         t->engine[6] / t->engine[0]);
}

/* Under callgrind (spec/bench/decide_instr.sh): one row's retrying
 * decisions and its baseline's, n of each, counted by --toggle-collect on
 * engine_retrying and bare_decision; the warm-up runs through other
 * functions, so it is not counted. */
__attribute__((noinline)) static void warm_up(mix_loop *m, bare_loop *b) {
  luaretry_call *c = mix_begin(m);
  luaretry_decision d;
  luaretry_call_report(c, &m->fail, &d);
  luaretry_call_free(c);
  if (!b) return;
  bare_pcall(b, 503, BODY);
}

static int count_instructions(int k, long n) {
  if (k < 0 || k >= ROW_COUNT) die("--instructions", "no such row");
  const row *r = &ROWS[k];
  luaretry_policy *p = row_policy(r);
  mix_loop m;
  bare_loop b;
  mix_init(&m, p, r->vary);
  if (r->bare >= 0) bare_init(&b, BARE[r->bare].file, BARE[r->bare].vary);
  warm_up(&m, r->bare >= 0 ? &b : NULL);
  for (long i = 0; i < n; i++) mix_cycle(&m, NULL);
  if (r->bare >= 0)
    for (long i = 0; i < n; i++) bare_cycle(&b, NULL);
  printf("%s\t%.2f\n", r->label, r->target); /* the target: decide_instr.sh's room */
  luaretry_policy_free(p);
  return 0;
}

/* luaretry_call_begin: the first BEGINS on a freshly loaded policy, then
 * BEGINS more once warm; and the first decision of a new thread. */
#define BEGINS 10000

static void *first_decision(void *arg) {
  double *ns = arg;
  luaretry_policy *p = *(luaretry_policy **)(ns + 1);
  luaretry_call *c;
  luaretry_call_options o;
  luaretry_call_options_init(&o);
  o.flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME;
  luaretry_call_begin(p, &o, &c);
  luaretry_outcome out;
  luaretry_outcome_init(&out);
  out.status = 503;
  luaretry_decision d;
  double t0 = now();
  luaretry_call_report(c, &out, &d);
  ns[0] = (now() - t0) * 1e9;
  luaretry_call_free(c);
  return NULL;
}

static void print_begins(void) {
  static luaretry_call *calls[BEGINS];
  luaretry_policy *p = load_http(1);
  luaretry_call_options o;
  luaretry_call_options_init(&o);
  o.flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME;
  double cold = 0, warm = 0;
  for (int round = 0; round < 2; round++) {
    double t0 = now();
    for (int i = 0; i < BEGINS; i++) luaretry_call_begin(p, &o, &calls[i]);
    double ns = (now() - t0) * 1e9 / BEGINS;
    for (int i = 0; i < BEGINS; i++) luaretry_call_free(calls[i]);
    if (round == 0)
      cold = ns;
    else
      warm = ns;
  }
  double slot[2];
  memcpy(&slot[1], &p, sizeof p);
  pthread_t t;
  pthread_create(&t, NULL, first_decision, slot);
  pthread_join(t, NULL);
  printf("%-46s %11.1f ns   < 2000 ns  %s\n", "begin, the first 10,000 on a new policy", cold,
         verdict(cold < 2000));
  printf("%-46s %11.1f ns\n", "begin, warm", warm);
  printf("%-46s %11.1f us   (makes the thread's Lua state)\n", "first decision of a new thread",
         slot[0] / 1000);
  luaretry_policy_free(p);
}

/* Resident memory a call in flight holds: `count` calls begun and judged
 * once (so each waits for its retry).  Without the budget: 100,000 calls
 * that each failed once spend its tokens, and the rest would be calls it
 * stopped, each holding its refusal's message (688 B more), not calls in
 * flight. */
static void print_inflight(long count) {
  luaretry_policy *p =
    load_policy("policies/http.lua", "max_attempts", "1000000000", "budget", "none");
  if (luaretry_policy_set(p, "deadline", "none") != LUARETRY_OK)
    die("set", luaretry_policy_errmsg(p));
  luaretry_call **calls = calloc((size_t)count, sizeof *calls);
  if (!calls) die("calloc", "out of memory");
  luaretry_call_options o;
  luaretry_call_options_init(&o);
  o.flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME;
  luaretry_outcome out;
  luaretry_outcome_init(&out);
  out.status = 503;
  out.body = BODY;
  out.body_len = sizeof BODY - 1;
  luaretry_decision d;
  size_t rss0 = resident_bytes();
  long waiting = 0;
  for (long i = 0; i < count; i++) {
    o.seed = (uint64_t)i;
    luaretry_call_begin(p, &o, &calls[i]);
    luaretry_call_report(calls[i], &out, &d);
    waiting += d.retry;
  }
  if (waiting != count) die("calls in flight", "a call was stopped, not waiting for its retry");
  double each = rss0 < resident_bytes() ? (double)(resident_bytes() - rss0) / (double)count : 0;
  char label[64];
  snprintf(label, sizeof label, "memory per call in flight (%ld calls)", count);
  printf("%-46s %12.0f B   <= %d B  %s\n", label, each, TARGET_INFLIGHT,
         verdict(each <= TARGET_INFLIGHT));
  for (long i = 0; i < count; i++) luaretry_call_free(calls[i]);
  free(calls);
  luaretry_policy_free(p);
}

/* Scaling: the same Lua decision on 1 and 2 threads sharing the policy,
 * best of RUNS each.  Target: 2 threads make at least 1.8x the decisions
 * of one, judged on the CPU clocks (on the wall clock a shared VM's other
 * tenants decide it), and only on runs where both threads did run at once
 * at least 80% of the time (a neighbour that takes a CPU away also slows
 * the caches and the core the threads share).
 *
 * Each thread is pinned to a CPU of its own, and its time beside the other
 * is set against the time of one thread alone on that same CPU: the
 * ratio is then what sharing the policy costs, whatever CPU a thread got.
 * The VM's CPUs need not be alike: on the 2-CPU machine of issue 28 the
 * same Lua loop (no luaretry, a state per thread) took ~75 ns a call on
 * one and ~120 ns on the other, run after run; set against the faster
 * CPU alone, as this bench did before, two independent threads read
 * 1.5x, not 2. */
#define TARGET_SCALING 1.8

typedef struct {
  double alone_ns[2];      /* one thread alone on each CPU, best of the runs */
  double alone_per_sec[2]; /* its decisions per second (wall) */
  double beside_ns[RUNS][2];
  double beside_overlap[RUNS], beside_per_sec[RUNS];
  int beside; /* runs kept (both threads ran at once >= 80% of the time) */
} pinned_runs;

/* The first two CPUs this process may run on; 0 when it has fewer. */
static int two_cpus(int cpu[2]) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  int k = 0;
  for (int c = 0; c < CPU_SETSIZE && k < 2; c++)
    if (CPU_ISSET(c, &set)) cpu[k++] = c;
  return k == 2;
}

/* 0 when a thread could not be pinned (the figures are then unpinned). */
static int run_pinned(luaretry_policy *p, long n, const int cpu[2], pinned_runs *pr) {
  for (int k = 0; k < 2; k++) pr->alone_ns[k] = 1e300, pr->alone_per_sec[k] = 0;
  pr->beside = 0;
  for (int r = 0; r < RUNS; r++) {
    for (int k = 0; k < 2; k++) {
      scaling one = throughput(p, 1, n, &cpu[k]);
      if (!one.pinned) return 0;
      if (one.cpu_ns < pr->alone_ns[k]) pr->alone_ns[k] = one.cpu_ns;
      if (one.per_second > pr->alone_per_sec[k]) pr->alone_per_sec[k] = one.per_second;
    }
    scaling two = throughput(p, 2, n, cpu);
    if (!two.pinned) return 0;
    if (two.overlap < 1.8) continue; /* the threads took turns: no contention shows */
    int b = pr->beside++;
    pr->beside_ns[b][0] = two.thread_ns[0];
    pr->beside_ns[b][1] = two.thread_ns[1];
    pr->beside_overlap[b] = two.overlap;
    pr->beside_per_sec[b] = two.per_second;
  }
  return 1;
}

static void print_pinned(const int cpu[2], const pinned_runs *pr) {
  double best = 0, wall = 0;
  int at = -1;
  for (int b = 0; b < pr->beside; b++) {
    double by_cpu = pr->alone_ns[0] / pr->beside_ns[b][0] + pr->alone_ns[1] / pr->beside_ns[b][1];
    if (by_cpu > best) best = by_cpu, at = b;
    if (pr->beside_per_sec[b] > wall) wall = pr->beside_per_sec[b];
  }
  char label[64];
  snprintf(label, sizeof label, "(a) 1 thread alone, CPU %d / CPU %d", cpu[0], cpu[1]);
  printf("%-46s %5.1f / %5.1f ns CPU time per decision (the CPUs' own speeds)\n", label,
         pr->alone_ns[0], pr->alone_ns[1]);
  if (at < 0) {
    printf("%-46s %14s   (not judged: in no run did both threads run at once 80%% of the time)\n",
           "(a) 2 threads, one on each", "-");
    return;
  }
  printf("%-46s %5.1f / %5.1f ns   (%d of %d runs overlapped; this one at %.0f%%)\n",
         "(a) 2 threads, one on each", pr->beside_ns[at][0], pr->beside_ns[at][1], pr->beside, RUNS,
         100 * (pr->beside_overlap[at] - 1));
  printf("%-46s %13.2fx   (of the two CPUs' rates alone added; ideal 1)\n",
         "(a) 2 threads, decisions per second (wall)",
         wall / (pr->alone_per_sec[0] + pr->alone_per_sec[1]));
  printf("%-46s %13.2fx   >= %.2fx  %s\n", "2 threads / 1, by CPU time, CPU by CPU", best,
         TARGET_SCALING, verdict(best >= TARGET_SCALING));
}

/* Unpinned (fewer than two CPUs to pin to, or pinning refused): each
 * thread set against the best of one thread alone, wherever it ran. */
static void print_unpinned(luaretry_policy *p, long n) {
  scaling one = { 0, 1e300, { 0, 0 }, 0, 1 }, two = { 0, 1e300, { 0, 0 }, 0, 1 };
  int overlapped = 0;
  for (int r = 0; r < RUNS; r++) {
    scaling s1 = throughput(p, 1, n, NULL), s2 = throughput(p, 2, n, NULL);
    if (s1.per_second > one.per_second) one.per_second = s1.per_second;
    if (s1.cpu_ns < one.cpu_ns) one.cpu_ns = s1.cpu_ns;
    if (s2.per_second > two.per_second) two.per_second = s2.per_second;
    if (s2.overlap < 1.8) continue;
    overlapped++;
    if (s2.cpu_ns < two.cpu_ns) two.cpu_ns = s2.cpu_ns, two.overlap = s2.overlap;
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  printf("%-46s %11.1f ns   (unpinned)\n", "(a) on 1 thread: CPU time per decision", one.cpu_ns);
  if (cpus < 2 || !overlapped) {
    printf("%-46s %14s   (not judged: in no run did both threads run at once 80%% of the time)\n",
           "(a) on 2 threads: CPU time per decision", "-");
    return;
  }
  double by_cpu = 2 * one.cpu_ns / two.cpu_ns;
  printf("%-46s %11.1f ns   (%d of %d runs overlapped; the best at %.0f%%)\n",
         "(a) on 2 threads: CPU time per decision", two.cpu_ns, overlapped, RUNS,
         100 * (two.overlap - 1));
  printf("%-46s %13.2fx   >= %.2fx  %s\n", "2 threads / 1, by CPU time", by_cpu, TARGET_SCALING,
         verdict(by_cpu >= TARGET_SCALING));
}

static void print_scaling(long n) {
  luaretry_policy *p_lua = load_http(1);
  int cpu[2];
  pinned_runs pr;
  if (two_cpus(cpu) && run_pinned(p_lua, n, cpu, &pr))
    print_pinned(cpu, &pr);
  else
    print_unpinned(p_lua, n);
  luaretry_policy_free(p_lua);
}

/* The figures in the order they are printed: each step a few lines. */
int main(int argc, char **argv) {
  if (chdir(LUARETRY_DATADIR) != 0) die(LUARETRY_DATADIR, "cannot chdir");

  struct utsname u;
  if (uname(&u) != 0) strcpy(u.machine, "?");
  char date[64];
  time_t clock_now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", gmtime(&clock_now));
  double load[1] = { -1 }; /* the machine is shared: how busy it was */
  getloadavg(load, 1);
  printf("luaretry %s bench: decide   %s, %ld CPUs, load %.2f, %s, %s\n", LUARETRY_VERSION,
         u.machine, sysconf(_SC_NPROCESSORS_ONLN), load[0], LUA_RELEASE, date);

  make_bodies();
  if (argc == 4 && strcmp(argv[1], "--instructions") == 0)
    return count_instructions(atoi(argv[2]), atol(argv[3]));
  timings t = time_decisions();
  print_decisions(&t);

  print_scaling(20000);
  print_begins();
  print_inflight(1000);
  print_inflight(100000);

  /* Memory: one loaded policy, then 1,000 side by side. */
  luaretry_policy *one = load_http(0);
  size_t one_bytes = luaretry_policy_memory(one);
  luaretry_policy_free(one);
  char buf[64];
  snprintf(buf, sizeof buf, "%zu B (%.1f KiB)", one_bytes, one_bytes / 1024.0);
  printf("%-38s %22s   < %d KiB  %s\n", "memory of one loaded policy (http.lua)", buf,
         TARGET_MEMORY / 1024, verdict(one_bytes < TARGET_MEMORY));

  luaretry_policy **many = calloc(POLICIES, sizeof *many);
  if (!many) die("calloc", "out of memory");
  size_t rss0 = resident_bytes(), total = 0;
  double t0 = now();
  for (int i = 0; i < POLICIES; i++) {
    many[i] = load_http(0);
    total += luaretry_policy_memory(many[i]);
  }
  double load_time = now() - t0;
  size_t rss1 = resident_bytes();
  snprintf(buf, sizeof buf, "%.2f MiB", total / 1048576.0);
  printf("%-38s %22s   (%.1f KiB each)\n", "memory of 1000 loaded policies (Lua)", buf,
         total / 1024.0 / POLICIES);
  if (rss1 > rss0) {
    snprintf(buf, sizeof buf, "%.2f MiB", (rss1 - rss0) / 1048576.0);
    printf("%-38s %22s   (%.1f KiB each, handle included)\n", "resident growth for those 1000", buf,
           (rss1 - rss0) / 1024.0 / POLICIES);
  }
  printf("%-38s %19.1f us\n", "load of one policy (mean of 1000)", load_time * 1e6 / POLICIES);
  for (int i = 0; i < POLICIES; i++) luaretry_policy_free(many[i]);
  free(many);
  return 0;
}
