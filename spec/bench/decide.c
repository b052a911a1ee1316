/* decide.c: what one retry decision costs, and what a loaded policy holds.
 *
 *   (a) the engine's decision with policies/http.lua's Lua is_transient
 *       (classification, backoff with jitter, deadline check), step API on
 *       the virtual clock with a fixed seed;
 *   (b) the same loop with a C classifier instead of the script;
 *   (c) a bare lua_pcall of the same is_transient in a plain Lua state,
 *       with the same status and body: the floor the engine is held to;
 *   (d) (c) again, but the way the sandbox must call a script: through a
 *       protected C function (pushing the body can raise under the memory
 *       limit) and under a count hook (the instruction limit).  (d)/(c) is
 *       the price of the sandbox alone; (a)-(d) is the engine's own work.
 *
 * Each figure is the best of 5 runs, interleaved; a run lasts ~60 ms.
 * Then luaretry_policy_memory of one loaded http.lua, and of 1,000.
 * `make bench` builds and runs it from the top of the tree. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <pthread.h>
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

#define RUNS 5
#define RUN_SECONDS 0.06
#define POLICIES 1000
#define TARGET_OVERHEAD 1.5
#define TARGET_MEMORY (64 * 1024)

static const char BODY[] = "<html><body>503 Service Unavailable</body></html>";

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, const char *detail) {
  fprintf(stderr, "bench_decide: %s: %s\n", what, detail);
  exit(1);
}

/* ---- (a) and (b): the engine, through the step API */
static double now(void);

typedef struct {
  luaretry_policy *p;
  luaretry_call *c;
  uint64_t seed;
  luaretry_outcome o;
  long decisions, calls;
} engine_loop;

static void engine_begin(engine_loop *e) {
  luaretry_call_options opt;
  luaretry_call_options_init(&opt);
  opt.flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME;
  opt.seed = e->seed++;
  if (luaretry_call_begin(e->p, &opt, &e->c) != LUARETRY_OK)
    die("begin", luaretry_policy_errmsg(e->p));
  e->calls++;
}

/* n decisions; ns per decision. */
static double engine_run(engine_loop *e, long n) {
  luaretry_decision d;
  double t0 = now();
  for (long i = 0; i < n; i++) {
    if (luaretry_call_report(e->c, &e->o, &d) != LUARETRY_OK)
      die("report", luaretry_call_errmsg(e->c));
    if (d.retry) {
      luaretry_call_wait(e->c, d.wait);  /* virtual: advances the clock */
    } else {
      if (d.reason == LUARETRY_REASON_POLICY_ERROR)
        die("policy error", d.message ? d.message : "?");
      luaretry_call_free(e->c);
      engine_begin(e);
    }
  }
  double t = now() - t0;
  e->decisions += n;
  return t * 1e9 / (double)n;
}

/* (a) on T threads at once, one policy, each thread its own calls: the
 * decisions per second of all threads together. */
typedef struct { engine_loop loop; long n; } thread_job;

static void *thread_run(void *arg) {
  thread_job *job = arg;
  engine_run(&job->loop, job->n);
  return NULL;
}

static void engine_init(engine_loop *e, luaretry_policy *p);

static double throughput(luaretry_policy *p, int threads, long n) {
  thread_job jobs[8];
  pthread_t t[8];
  for (int i = 0; i < threads; i++) {
    engine_init(&jobs[i].loop, p);
    jobs[i].loop.seed = (uint64_t)i * 1000003u;
    jobs[i].n = n;
  }
  double t0 = now();
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, thread_run, &jobs[i]);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  double elapsed = now() - t0;
  for (int i = 0; i < threads; i++) luaretry_call_free(jobs[i].loop.c);
  return (double)threads * (double)n / elapsed;
}

static luaretry_class c_classify(void *ud, const luaretry_outcome *o,
                                 int attempt, double *wait) {
  (void)ud; (void)attempt; (void)wait;
  if (o->error) return LUARETRY_CLASS_TRANSIENT;
  if (o->status >= 200 && o->status <= 399) return LUARETRY_CLASS_SUCCESS;
  switch (o->status) {
  case 0: case 408: case 429: case 500: case 502: case 503: case 504:
    return LUARETRY_CLASS_TRANSIENT;
  }
  return LUARETRY_CLASS_FINAL;
}

static luaretry_policy *load_http(int long_calls) {
  luaretry_policy *p;
  if (luaretry_policy_new(&p) != LUARETRY_OK) die("policy_new", "out of memory");
  if (luaretry_policy_load_file(p, "policies/http.lua") != LUARETRY_OK)
    die("policies/http.lua", luaretry_policy_errmsg(p));
  if (long_calls &&
      (luaretry_policy_set(p, "max_attempts", "1000000000") != LUARETRY_OK ||
       luaretry_policy_set(p, "deadline", "none") != LUARETRY_OK))
    die("set", luaretry_policy_errmsg(p));
  return p;
}

static void engine_init(engine_loop *e, luaretry_policy *p) {
  memset(e, 0, sizeof *e);
  e->p = p;
  e->seed = 1;
  luaretry_outcome_init(&e->o);
  e->o.status = 503;
  e->o.body = BODY;
  e->o.body_len = sizeof BODY - 1;
  e->o.method = "GET";
  e->o.url = "http://service.invalid/v1/items";
  engine_begin(e);
}

/* ---- (c): a bare lua_pcall of the same function */

typedef struct {
  lua_State *L;
  int fn, info;
  int sandboxed;  /* (d): C trampoline and count hook */
} bare_loop;

static int trampoline(lua_State *L) {
  bare_loop *b = lua_touserdata(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, b->fn);
  lua_pushinteger(L, 503);
  lua_pushlstring(L, BODY, sizeof BODY - 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, b->info);
  lua_call(L, 3, 1);
  return 1;
}

static void count_hook(lua_State *L, lua_Debug *ar) {
  (void)L; (void)ar;  /* the sandbox checks a budget here */
}

static void bare_init(bare_loop *b, int sandboxed) {
  b->sandboxed = sandboxed;
  b->L = luaL_newstate();
  if (!b->L) die("luaL_newstate", "out of memory");
  lua_State *L = b->L;
  luaL_openlibs(L);
  lua_getglobal(L, "package");
  lua_pushstring(L, LUARETRY_DATADIR "/lua/?.lua");
  lua_setfield(L, -2, "path");
  lua_pop(L, 1);
  if (luaL_dofile(L, LUARETRY_DATADIR "/policies/http.lua") != LUA_OK)
    die("bare state", lua_tostring(L, -1));
  if (lua_getglobal(L, "is_transient") != LUA_TFUNCTION)
    die("bare state", "no is_transient");
  b->fn = luaL_ref(L, LUA_REGISTRYINDEX);
  /* What the engine's info offers, as a plain table made once. */
  lua_createtable(L, 0, 6);
  lua_pushinteger(L, 1); lua_setfield(L, -2, "attempt");
  lua_pushnumber(L, 0); lua_setfield(L, -2, "elapsed");
  lua_pushstring(L, "GET"); lua_setfield(L, -2, "method");
  lua_pushstring(L, "http://service.invalid/v1/items"); lua_setfield(L, -2, "url");
  lua_pushboolean(L, 0); lua_setfield(L, -2, "workflow");
  lua_newtable(L); lua_setfield(L, -2, "headers");
  b->info = luaL_ref(L, LUA_REGISTRYINDEX);
  if (sandboxed) lua_sethook(L, count_hook, LUA_MASKCOUNT, 1000);
}

static double bare_run(bare_loop *b, long n) {
  lua_State *L = b->L;
  long yes = 0;
  double t0 = now();
  for (long i = 0; i < n; i++) {
    int status;
    if (b->sandboxed) {
      lua_pushcfunction(L, trampoline);
      lua_pushlightuserdata(L, b);
      status = lua_pcall(L, 1, 1, 0);
    } else {
      lua_rawgeti(L, LUA_REGISTRYINDEX, b->fn);
      lua_pushinteger(L, 503);
      lua_pushlstring(L, BODY, sizeof BODY - 1);
      lua_rawgeti(L, LUA_REGISTRYINDEX, b->info);
      status = lua_pcall(L, 3, 1, 0);
    }
    if (status != LUA_OK) die("bare pcall", lua_tostring(L, -1));
    yes += lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  double t = now() - t0;
  if (yes != n) die("bare pcall", "is_transient(503) was not true");
  return t * 1e9 / (double)n;
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

int main(void) {
  if (chdir(LUARETRY_DATADIR) != 0) die(LUARETRY_DATADIR, "cannot chdir");

  struct utsname u;
  if (uname(&u) != 0) strcpy(u.machine, "?");
  char date[64];
  time_t t = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", gmtime(&t));
  printf("luaretry %s bench: decide   %s, %ld CPUs, %s, %s\n", LUARETRY_VERSION,
         u.machine, sysconf(_SC_NPROCESSORS_ONLN), LUA_RELEASE, date);

  engine_loop lua_loop, c_loop;
  luaretry_policy *p_lua = load_http(1), *p_c = load_http(1);
  if (luaretry_policy_set_classifier(p_c, c_classify, NULL) != LUARETRY_OK)
    die("set_classifier", luaretry_policy_errmsg(p_c));
  engine_init(&lua_loop, p_lua);
  engine_init(&c_loop, p_c);
  bare_loop bare, boxed;
  bare_init(&bare, 0);
  bare_init(&boxed, 1);

  /* Calibrate on the slowest loop so one run lasts about RUN_SECONDS. */
  engine_run(&lua_loop, 20000);
  bare_run(&bare, 20000);
  bare_run(&boxed, 20000);
  double per = engine_run(&lua_loop, 50000);
  long n = (long)(RUN_SECONDS * 1e9 / per);
  if (n < 50000) n = 50000;
  if (n > 20000000) n = 20000000;

  double best_a = 1e300, best_b = 1e300, best_c = 1e300, best_d = 1e300;
  for (int r = 0; r < RUNS; r++) {
    double a = engine_run(&lua_loop, n);
    double b = engine_run(&c_loop, n);
    double c = bare_run(&bare, n);
    double d = bare_run(&boxed, n);
    if (a < best_a) best_a = a;
    if (b < best_b) best_b = b;
    if (c < best_c) best_c = c;
    if (d < best_d) best_d = d;
  }
  double overhead = best_a / best_c;
  printf("%ld decisions per run, best of %d runs; status 503, a %zu-byte body\n\n",
         n, RUNS, sizeof BODY - 1);
  printf("%-46s %14s   %s\n", "figure", "result", "target");
  printf("%-46s %11.1f ns\n", "(a) engine decision, Lua is_transient", best_a);
  printf("%-46s %11.1f ns\n", "(b) engine decision, C classifier", best_b);
  printf("%-46s %11.1f ns\n", "(c) bare lua_pcall of is_transient", best_c);
  printf("%-46s %11.1f ns   (%.2fx (c))\n", "(d) (c) in a sandboxed state: hook + trampoline",
         best_d, best_d / best_c);
  /* Two readings of the target: against a pcall in the same sandboxed
   * state (the limit the issue requires is part of the baseline), and
   * against a pcall in a plain state (the limit counted as overhead). */
  printf("%-46s %13.2fx   <= %.1fx  %s\n", "engine over sandboxed pcall (a)/(d)",
         best_a / best_d, TARGET_OVERHEAD, verdict(best_a / best_d <= TARGET_OVERHEAD));
  printf("%-46s %13.2fx   <= %.1fx  %s\n", "engine over plain pcall (a)/(c)", overhead,
         TARGET_OVERHEAD, verdict(overhead <= TARGET_OVERHEAD));
  printf("%-46s %11.1f ns\n", "engine's own work (a)-(d)", best_a - best_d);

  /* Scaling: the same Lua decision on 1 and 2 threads sharing the policy. */
  double tput1 = 0, tput2 = 0;
  for (int r = 0; r < RUNS; r++) {
    double t1 = throughput(p_lua, 1, n), t2 = throughput(p_lua, 2, n);
    if (t1 > tput1) tput1 = t1;
    if (t2 > tput2) tput2 = t2;
  }
  printf("%-46s %11.1f ns   (%.2fx the decisions of one thread; ideal %ld)\n",
         "(a) on 2 threads, one policy: per decision", 2e9 / tput2, tput2 / tput1,
         sysconf(_SC_NPROCESSORS_ONLN) >= 2 ? 2L : 1L);

  luaretry_call_free(lua_loop.c);
  luaretry_call_free(c_loop.c);
  luaretry_policy_free(p_lua);
  luaretry_policy_free(p_c);
  lua_close(bare.L);
  lua_close(boxed.L);

  /* Memory: one loaded policy, then 1,000 side by side. */
  luaretry_policy *one = load_http(0);
  size_t one_bytes = luaretry_policy_memory(one);
  luaretry_policy_free(one);
  char buf[64];
  snprintf(buf, sizeof buf, "%zu B (%.1f KiB)", one_bytes, one_bytes / 1024.0);
  printf("%-38s %22s   < %d KiB  %s\n", "memory of one loaded policy (http.lua)",
         buf, TARGET_MEMORY / 1024, verdict(one_bytes < TARGET_MEMORY));

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
  printf("%-38s %22s   (%.1f KiB each)\n", "memory of 1000 loaded policies (Lua)",
         buf, total / 1024.0 / POLICIES);
  if (rss1 > rss0) {
    snprintf(buf, sizeof buf, "%.2f MiB", (rss1 - rss0) / 1048576.0);
    printf("%-38s %22s   (%.1f KiB each, handle included)\n",
           "resident growth for those 1000", buf,
           (rss1 - rss0) / 1024.0 / POLICIES);
  }
  printf("%-38s %19.1f us\n", "load of one policy (mean of 1000)",
         load_time * 1e6 / POLICIES);
  for (int i = 0; i < POLICIES; i++) luaretry_policy_free(many[i]);
  free(many);
  return 0;
}
