/* decide.c: what a decision costs with fleet guards next to local
 * ones, through the public API on the real clock, against a local
 * redis-server (started here on a loopback port, stopped at the end).
 *
 *   (a) a success: luaretry_call_report of a 200 (the engine's decision
 *       and the guards: with the fleet, a count and a maybe_sync that
 *       never waits), timed in batches of 100 calls begun beforehand (a
 *       clock read costs about as much as the decision): p50 and p99 of
 *       the batches' mean, local and fleet interleaved in rounds;
 *   (b) a whole call that succeeds at once, each timed alone: begin (the
 *       breaker's admission), report, free;
 *   (c) a failure and the pre-retry check after it: luaretry_call_report
 *       of a 503 + luaretry_call_next (the fleet's round trip is its thread's: none here).
 * Three loads of one policy, with a budget and a breaker that never
 * refuse here: no fleet (the local guards), Redis's fleet, and the local
 * store (fleet.local, a shared-memory file in a temporary folder).
 * `make bench` runs it (bench_fleet_decide). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "luaretry.h"
#include "redis_helper.h"

#define ROUNDS    10
#define PER_ROUND 20000
#define BATCH     100
#define FAILURES  400

static const char *POLICY =
  "max_attempts = 4\n"
  "deadline = 30\n"
  "attempt_timeout = 5\n"
  "budget = { max_tokens = 1000, token_ratio = 0.1 }\n"
  "breaker = { failures = 1000000, open_seconds = 1 }\n"
  "function is_transient(status) return status >= 500 end\n";

static void die(const char *what, const char *detail) {
  fprintf(stderr, "bench_fleet_decide: %s: %s\n", what, detail);
  exit(1);
}

/* field NULL: no fleet; else "fleet.redis" or "fleet.local" = value */
static luaretry_policy *load(const char *field, const char *value) {
  luaretry_policy *p;
  if (luaretry_policy_new(&p) != LUARETRY_OK) die("policy", "out of memory");
  if (field && luaretry_policy_set(p, field, value) != LUARETRY_OK)
    die(field, luaretry_policy_errmsg(p));
  if (luaretry_policy_load_string(p, "=bench", POLICY) != LUARETRY_OK)
    die("load", luaretry_policy_errmsg(p));
  if (field && luaretry_policy_fleet_sync(p) != LUARETRY_OK) die("sync", luaretry_policy_errmsg(p));
  luaretry_metrics m;
  luaretry_policy_metrics(p, &m);
  if (field && m.guards != LUARETRY_GUARDS_FLEET) die(field, "the guards are not fleet-wide");
  return p;
}

static luaretry_call *begin(luaretry_policy *p) {
  luaretry_call *c;
  if (luaretry_call_begin(p, NULL, &c) != LUARETRY_OK) die("begin", luaretry_policy_errmsg(p));
  return c;
}

static luaretry_outcome outcome(int status) {
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.status = status;
  o.body = "";
  o.method = "GET";
  return o;
}

/* BATCH successes, the reports timed together: ns per report. */
static double reports(luaretry_policy *p) {
  luaretry_call *c[BATCH];
  luaretry_outcome o = outcome(200);
  luaretry_decision d;
  for (int i = 0; i < BATCH; i++) c[i] = begin(p);
  double t0 = redis_now_();
  for (int i = 0; i < BATCH; i++) luaretry_call_report(c[i], &o, &d);
  double t1 = redis_now_();
  for (int i = 0; i < BATCH; i++) luaretry_call_free(c[i]);
  if (d.reason != LUARETRY_REASON_SUCCESS) die("success", luaretry_reason_name(d.reason));
  return (t1 - t0) * 1e9 / BATCH;
}

/* One call that succeeds at once, begin to free (ns). */
static double whole_call(luaretry_policy *p) {
  luaretry_outcome o = outcome(200);
  luaretry_decision d;
  double t0 = redis_now_();
  luaretry_call *c = begin(p);
  luaretry_call_report(c, &o, &d);
  luaretry_call_free(c);
  return (redis_now_() - t0) * 1e9;
}

/* A failure and the check before its retry, timed (ns). */
static double failure(luaretry_policy *p) {
  luaretry_outcome o = outcome(503);
  luaretry_decision d;
  luaretry_call *c = begin(p);
  double t0 = redis_now_();
  luaretry_call_report(c, &o, &d);
  if (d.retry) luaretry_call_next(c, &d);
  double t1 = redis_now_();
  if (!d.retry) die("failure", luaretry_reason_name(d.reason));
  luaretry_call_free(c);
  return (t1 - t0) * 1e9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, int p) {
  qsort(v, n, sizeof *v, cmp_double);
  return v[n * (size_t)p / 100];
}

static void row(const char *what, double *local, double *fleet, double *store, size_t n,
                const char *unit, double scale) {
  double l50 = pct(local, n, 50), l99 = pct(local, n, 99);
  double f50 = pct(fleet, n, 50), f99 = pct(fleet, n, 99);
  double s50 = pct(store, n, 50), s99 = pct(store, n, 99);
  printf(
    "| %s | p50 %.1f, p99 %.1f %s | p50 %.1f, p99 %.1f %s | p50 %.1f, p99 %.1f %s | "
    "%.2fx, %.2fx | %.2fx, %.2fx |\n",
    what, f50 / scale, f99 / scale, unit, s50 / scale, s99 / scale, unit, l50 / scale, l99 / scale,
    unit, f50 / l50, f99 / l99, s50 / l50, s99 / l99);
}

int main(void) {
  redis_srv srv;
  if (redis_start(&srv, (const char *)NULL) != 0) die("redis-server", "did not start");
  char url[100];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", srv.port);
  char dir[] = "/tmp/lr-bench-XXXXXX";
  if (!mkdtemp(dir)) die("mkdtemp", "failed");
  luaretry_policy *local = load(NULL, NULL), *fleet = load("fleet.redis", url);
  luaretry_policy *store = load("fleet.local", dir);
  size_t n = (size_t)ROUNDS * PER_ROUND, nb = n / BATCH;
  double *lr = malloc(n * sizeof *lr), *lc = malloc(n * sizeof *lc);
  double *fr = malloc(n * sizeof *fr), *fc = malloc(n * sizeof *fc);
  double *sr = malloc(n * sizeof *sr), *sc = malloc(n * sizeof *sc);
  if (!lr || !lc || !fr || !fc || !sr || !sc) die("memory", "out of memory");
  for (int i = 0; i < PER_ROUND; i++) /* warm */
    whole_call(local), whole_call(fleet), whole_call(store);
  for (int r = 0; r < ROUNDS; r++) { /* interleaved: the VM's drift hits both */
    size_t b0 = (size_t)r * (nb / ROUNDS);
    for (size_t i = 0; i < nb / ROUNDS; i++) lr[b0 + i] = reports(local);
    for (size_t i = 0; i < nb / ROUNDS; i++) fr[b0 + i] = reports(fleet);
    for (size_t i = 0; i < nb / ROUNDS; i++) sr[b0 + i] = reports(store);
    for (int i = 0; i < PER_ROUND; i++) lc[r * PER_ROUND + i] = whole_call(local);
    for (int i = 0; i < PER_ROUND; i++) fc[r * PER_ROUND + i] = whole_call(fleet);
    for (int i = 0; i < PER_ROUND; i++) sc[r * PER_ROUND + i] = whole_call(store);
  }
  printf(
    "| real clock, %zu of each | fleet guards (Redis) | local store (fleet.local) | no fleet "
    "(local guards) | Redis / no fleet | local store / no fleet |\n"
    "|---|---|---|---|---|---|\n",
    n);
  row("success decision: luaretry_call_report of a 200 (mean of 100)", lr, fr, sr, nb, "ns", 1);
  row("a call that succeeds: begin + report + free", lc, fc, sc, n, "ns", 1);
  /* Redis's round trips apart: what runs after one finds its caches cold */
  for (int i = 0; i < FAILURES; i++) lr[i] = failure(local), sr[i] = failure(store);
  for (int i = 0; i < FAILURES; i++) fr[i] = failure(fleet);
  row("failure: report of a 503 + luaretry_call_next", lr, fr, sr, FAILURES, "us", 1000);
  luaretry_policy_fleet_reset(fleet);
  luaretry_fleet_status st;
  if (luaretry_policy_fleet_status(store, &st) == LUARETRY_OK) unlink(st.where);
  luaretry_fleet_status_free(&st);
  rmdir(dir);
  luaretry_policy_free(local);
  luaretry_policy_free(fleet);
  luaretry_policy_free(store);
  free(lr), free(lc), free(fr), free(fc), free(sr), free(sc);
  redis_stop(&srv);
  return 0;
}
