/* fleet.c: what the fleet's guards cost, against a local redis-server
 * (started here, on a loopback port and a Unix socket, stopped at the end).
 *
 *   (a) the success path: lr_fleet_record(SUCCESS) + lr_fleet_maybe_sync,
 *       connected and syncing every sync_ms, next to a plain relaxed
 *       atomic add (the floor) and to lr_fleet_record alone;
 *   (b) a decision: lr_fleet_breaker_admits(f, 1) + budget_allows_retry
 *       from the fleet's view, next to two plain atomic loads;
 *   (c) one lr_fleet_sync_now round trip (flush + EVALSHA + state), p50 and
 *       p99 over 2,000, over TCP and over the Unix socket;
 *   (d) (a) with 4 threads on one handle, next to 4 threads on one atomic.
 * Each (a), (b), (d) figure is the best of 5 interleaved runs of ~50 ms.
 * `make bench` builds and runs it. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"
#include "redis_helper.h"

#define RUNS    5
#define OPS     2000000L
#define TRIPS   2000
#define THREADS 4

static double now(void) { return redis_now_(); }

static atomic_llong plain_counter;

static void die(const char *what, const char *detail) {
  fprintf(stderr, "bench_fleet: %s: %s\n", what, detail);
  exit(1);
}

static lr_fleet *open_fleet(const char *url, const char *key) {
  lr_fleet_settings s;
  lr_fleet_settings_init(&s);
  s.budget = s.breaker = 1;
  s.max_tokens = 1000;
  s.failures = 1000000;
  lr_fleet *f = NULL;
  char err[300];
  if (lr_fleet_new(url, key, &s, &f, err, sizeof err) != LR_FLEET_OK) die("new", err);
  if (lr_fleet_sync_now(f) != LR_FLEET_OK) die("sync", url);
  return f;
}

typedef enum { PLAIN_ADD, RECORD, SUCCESS_PATH, PLAIN_LOADS, DECISION } loop_kind;

static volatile int sink;

/* ns per operation over n operations. */
static double run(loop_kind k, lr_fleet *f, long n) {
  double t0 = now();
  for (long i = 0; i < n; i++) {
    switch (k) {
    case PLAIN_ADD: atomic_fetch_add_explicit(&plain_counter, 1, memory_order_relaxed); break;
    case RECORD: lr_fleet_record(f, LR_FLEET_SUCCESS); break;
    case SUCCESS_PATH:
      lr_fleet_record(f, LR_FLEET_SUCCESS);
      lr_fleet_maybe_sync(f);
      break;
    case PLAIN_LOADS:
      sink = (int)atomic_load(&plain_counter) + (int)atomic_load(&plain_counter);
      break;
    case DECISION: sink = lr_fleet_breaker_admits(f, 1) + lr_fleet_budget_allows_retry(f); break;
    }
  }
  return (now() - t0) * 1e9 / (double)n;
}

typedef struct {
  loop_kind k;
  lr_fleet *f;
  long n;
} job;

static void *thread_main(void *arg) {
  job *j = arg;
  run(j->k, j->f, j->n);
  return NULL;
}

static double run_threads(loop_kind k, lr_fleet *f, long n) {
  pthread_t t[THREADS];
  job j = { k, f, n / THREADS };
  double t0 = now();
  for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, thread_main, &j);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  return (now() - t0) * 1e9 / (double)n;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void round_trips(const char *label, lr_fleet *f) {
  static double us[TRIPS];
  for (int i = 0; i < TRIPS; i++) {
    lr_fleet_record(f, LR_FLEET_FAILURE);
    lr_fleet_record(f, LR_FLEET_SUCCESS);
    double t0 = now();
    if (lr_fleet_sync_now(f) != LR_FLEET_OK) die("sync", label);
    us[i] = (now() - t0) * 1e6;
  }
  qsort(us, TRIPS, sizeof *us, cmp_double);
  printf("| one sync_now round trip, %s | p50 %.1f us, p99 %.1f us | %d trips |\n", label,
         us[TRIPS / 2], us[TRIPS * 99 / 100], TRIPS);
}

static void best_of(lr_fleet *f, int threads, loop_kind a, loop_kind b, double *ba, double *bb) {
  *ba = *bb = 1e18;
  for (int r = 0; r < RUNS; r++) {
    double x = threads ? run_threads(a, f, OPS) : run(a, f, OPS);
    double y = threads ? run_threads(b, f, OPS) : run(b, f, OPS);
    if (x < *ba) *ba = x;
    if (y < *bb) *bb = y;
  }
}

int main(void) {
  redis_srv srv;
  if (redis_start(&srv, (const char *)NULL) != 0) die("redis-server", "did not start");
  char url[100], unix_url[200];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", srv.port);
  snprintf(unix_url, sizeof unix_url, "unix://%s", srv.sock);
  lr_fleet *f = open_fleet(url, "bench");
  run(SUCCESS_PATH, f, OPS / 10); /* warm up */
  double add, path, rec, loads, dec, tadd, tpath;
  best_of(f, 0, PLAIN_ADD, SUCCESS_PATH, &add, &path);
  best_of(f, 0, PLAIN_ADD, RECORD, &add, &rec);
  best_of(f, 0, PLAIN_LOADS, DECISION, &loads, &dec);
  best_of(f, 1, PLAIN_ADD, SUCCESS_PATH, &tadd, &tpath);
  lr_fleet_view v;
  lr_fleet_view_get(f, &v);
  printf("| fleet guards | measured | baseline |\n|---|---|---|\n");
  printf("| success path: record + maybe_sync, 1 thread | %.1f ns | plain atomic add %.1f ns |\n",
         path, add);
  printf("| lr_fleet_record alone | %.1f ns | plain atomic add %.1f ns |\n", rec, add);
  printf(
    "| decision: breaker_admits + budget_allows_retry | %.1f ns | two atomic loads %.1f ns |\n",
    dec, loads);
  printf(
    "| success path, %d threads on one handle | %.1f ns per op | %d threads, one atomic: %.1f ns "
    "|\n",
    THREADS, tpath, THREADS, tadd);
  printf("| syncs sent meanwhile by maybe_sync (sync_ms 200) | %lld | health %s |\n", v.syncs,
         lr_fleet_health_name(v.health));
  round_trips("TCP 127.0.0.1", f);
  lr_fleet *u = open_fleet(unix_url, "bench");
  round_trips("Unix socket", u);
  char err[300];
  lr_fleet_reset(f, err, sizeof err);
  lr_fleet_free(u);
  lr_fleet_free(f);
  redis_stop(&srv);
  return 0;
}
