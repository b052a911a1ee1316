/* fleet_steps.c: the step API never waits for Redis (issue 29, item 5).
 * An event-loop host (it waits on its own, never in luaretry_call_wait)
 * makes 10,000 calls with every fleet guard (budget, breaker, throttle, a
 * fixed rate, hedge) against a local redis-server (redis_helper.h, a
 * loopback port), first with Redis running, then with Redis stopped by
 * SIGSTOP (fleet.command_timeout 1 s: a step that made a round trip would
 * take 1 s).  Each step (begin, next, report, hedge, report_attempt) is
 * timed alone; the table shows p50, p99, p99.9 and the slowest of each
 * run, the stopped run beside the running one (its baseline).  Goal: every
 * step <= 1 ms at p99.9 with Redis stopped.  `make bench` runs it
 * (bench_fleet_steps). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "luaretry.h"
#include "redis_helper.h"

#define CALLS 10000
#define STEPS (CALLS * 8)

static const char *POLICY =
  "name = 'steps'\n"
  "max_attempts = 3\n"
  "deadline = 30\n"
  "attempt_timeout = 5\n"
  "budget = { max_tokens = 1000, token_ratio = 0.5 }\n"
  "breaker = { failures = 1000000, open_seconds = 1 }\n"
  "admission = { k = 1000, window = 60 }\n"
  "rate = { limit = 1000000, burst = 1000 }\n"
  "hedge = { delay = 0.0001, max = 1 }\n"
  "fleet = { sync = 20 }\n";

static const luaretry_request GET = { .method = "GET", .url = "http://example.invalid/" };

static double *times;
static size_t count;

static void die(const char *what) {
  fprintf(stderr, "bench_fleet_steps: %s\n", what);
  exit(1);
}

static void took(double t0) {
  if (count < STEPS) times[count++] = redis_now_() - t0;
}

static void one_call(luaretry_policy *p, int i) {
  luaretry_call *c;
  double t0 = redis_now_();
  if (luaretry_call_begin(p, NULL, &c) != LUARETRY_OK) die("begin");
  took(t0);
  luaretry_decision d;
  for (int attempt = 0; attempt < 3; attempt++) {
    t0 = redis_now_();
    luaretry_call_next(c, &d);
    took(t0);
    if (!d.retry) break;
    luaretry_outcome o;
    luaretry_outcome_init(&o);
    o.status = i % 4 == 0 ? 503 : 200;
    if (i % 10 == 0) {
      int id = 0;
      luaretry_call_start(c, &id);
      t0 = redis_now_();
      luaretry_call_hedge(c, &GET, &d);
      took(t0);
      t0 = redis_now_();
      luaretry_call_report_attempt(c, id, &o, &d);
      took(t0);
    } else {
      t0 = redis_now_();
      luaretry_call_report(c, &o, &d);
      took(t0);
    }
    if (!d.retry) break;
  }
  luaretry_call_free(c);
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void run(luaretry_policy *p, const char *label) {
  count = 0;
  double t0 = redis_now_();
  for (int i = 0; i < CALLS; i++) {
    one_call(p, i);
    if (i % 50 == 0) redis_sleep_ms(1); /* the host's loop: time passes, syncs are due */
  }
  double spent = redis_now_() - t0;
  qsort(times, count, sizeof *times, by_value);
  luaretry_metrics m;
  luaretry_policy_metrics(p, &m);
  printf("| %-17s | %6zu | %7.1f | %7.1f | %7.1f | %8.1f | %-8s | %.2f s |\n", label, count,
         times[count / 2] * 1e6, times[count * 99 / 100] * 1e6, times[count * 999 / 1000] * 1e6,
         times[count - 1] * 1e6,
         m.guards == LUARETRY_GUARDS_FLEET      ? "fleet"
         : m.guards == LUARETRY_GUARDS_FALLBACK ? "fallback"
                                                : "local",
         spent);
}

int main(void) {
  times = calloc(STEPS, sizeof *times);
  if (!times) die("out of memory");
  redis_srv srv;
  if (redis_start(&srv, (const char *)NULL) != 0) die("redis-server did not start");
  char url[100];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", srv.port);
  luaretry_policy *p;
  if (luaretry_policy_new(&p) != LUARETRY_OK ||
      luaretry_policy_set(p, "fleet.redis", url) != LUARETRY_OK ||
      luaretry_policy_set(p, "fleet.command_timeout", "1000") != LUARETRY_OK ||
      luaretry_policy_load_string(p, "=steps", POLICY) != LUARETRY_OK ||
      luaretry_policy_fleet_sync(p) != LUARETRY_OK)
    die("the policy or its first sync");
  printf("fleet steps of an event-loop host, %d calls (us per step; guards at the end):\n", CALLS);
  printf("| %-17s | %6s | %7s | %7s | %7s | %8s | %-8s | %6s |\n", "Redis", "steps", "p50", "p99",
         "p99.9", "slowest", "guards", "time");
  run(p, "running");
  redis_signal(&srv, SIGSTOP);
  run(p, "stopped (SIGSTOP)");
  double t0 = redis_now_();
  luaretry_policy_free(p);
  printf("freeing the policy with Redis stopped: %.1f ms (goal <= 1 ms at p99.9 per step)\n",
         (redis_now_() - t0) * 1e3);
  redis_signal(&srv, SIGCONT);
  redis_stop(&srv);
  free(times);
  return 0;
}
