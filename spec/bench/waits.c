/* waits.c: how accurately a real-clock call waits.
 *
 * 1,000 waits (or N: `bench_waits N`, the smoke run's few) of 1 to 20 ms
 * (uniform, fixed seed) through luaretry_call_wait on a call on the real
 * clock, and the same waits, in the same order,
 * through a plain nanosleep loop: the baseline.  For each wait, the time
 * from just before the call to just after it is read on CLOCK_MONOTONIC;
 * lateness is that minus the wait asked for.  A wait that ended early
 * (lateness below 0) breaks the API's promise ("never returns early except
 * when cancelled"): the count must be 0.
 *
 * The two loops run at the same time, each in its own thread, so that both
 * see the same machine and the whole takes ~10.5 s rather than twice that.
 * Sleeping threads use no CPU: on 2 cores they hardly meet.
 * Public API only.  `make bench` builds and runs it from the top of the tree. */
#include <errno.h>
#include <math.h>
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

#define WAITS  1000
#define MIN_MS 1.0
#define MAX_MS 20.0
#define SEED   0x5eed2024u

static void die(const char *what, const char *detail) {
  fprintf(stderr, "bench_waits: %s: %s\n", what, detail);
  exit(1);
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* splitmix64: the fixed sequence of waits. */
static uint64_t next_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

static double waits[WAITS]; /* seconds */
static int n_waits = WAITS; /* bench_waits N: the first N of them (the smoke run's) */

typedef struct {
  luaretry_call *call; /* NULL: the nanosleep baseline */
  pthread_barrier_t *start;
  double late_us[WAITS]; /* measured minus asked, microseconds */
  const char *error;
} loop;

static void nanosleep_for(double seconds) {
  /* Ask for at least `seconds`: round up to the next nanosecond. */
  int64_t ns = (int64_t)ceil(seconds * 1e9);
  struct timespec req = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) }, rem;
  while (nanosleep(&req, &rem) != 0 && errno == EINTR) req = rem;
}

static void *run_loop(void *arg) {
  loop *l = arg;
  pthread_barrier_wait(l->start);
  for (int i = 0; i < n_waits; i++) {
    int64_t t0 = now_ns();
    if (l->call) {
      if (luaretry_call_wait(l->call, waits[i]) != LUARETRY_OK) {
        l->error = "luaretry_call_wait failed";
        return NULL;
      }
    } else {
      nanosleep_for(waits[i]);
    }
    int64_t t1 = now_ns();
    l->late_us[i] = ((double)(t1 - t0) - waits[i] * 1e9) / 1e3;
  }
  return NULL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct {
  double p50, p99, max, mean;
  int early;
} summary;

/* Nearest-rank percentiles. */
static summary summarize(const double *late) {
  int n = n_waits;
  double v[WAITS];
  memcpy(v, late, sizeof v[0] * (size_t)n);
  qsort(v, (size_t)n, sizeof v[0], cmp_double);
  summary s = { v[(n * 50 + 99) / 100 - 1], v[(n * 99 + 99) / 100 - 1], v[n - 1], 0, 0 };
  for (int i = 0; i < n; i++) {
    s.mean += v[i] / n;
    if (v[i] < 0) s.early++;
  }
  return s;
}

/* Set-up, the two loops side by side, then the table: printed in order. */
int main(int argc, char **argv) {
  if (argc > 1) {
    n_waits = atoi(argv[1]);
    if (n_waits < 1 || n_waits > WAITS) die("usage", "bench_waits [N], N from 1 to 1000");
  }
  if (chdir(LUARETRY_DATADIR) != 0) die(LUARETRY_DATADIR, "cannot chdir");

  struct utsname u;
  if (uname(&u) != 0) strcpy(u.machine, "?");
  char date[64];
  time_t t = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", gmtime(&t));
  printf("\nluaretry %s bench: waits   %s, %ld CPUs, %s\n", LUARETRY_VERSION, u.machine,
         sysconf(_SC_NPROCESSORS_ONLN), date);

  uint64_t s = SEED;
  double total = 0;
  for (int i = 0; i < n_waits; i++) {
    double r = (double)(next_u64(&s) >> 11) * 0x1.0p-53; /* [0, 1) */
    waits[i] = (MIN_MS + r * (MAX_MS - MIN_MS)) * 1e-3;
    total += waits[i];
  }

  luaretry_policy *p;
  if (luaretry_policy_new(&p) != LUARETRY_OK) die("policy_new", "out of memory");
  if (luaretry_policy_load_file(p, "policies/http.lua") != LUARETRY_OK)
    die("policies/http.lua", luaretry_policy_errmsg(p));
  luaretry_call *c;
  luaretry_call_options opt;
  luaretry_call_options_init(&opt); /* the real clock */
  if (luaretry_call_begin(p, &opt, &c) != LUARETRY_OK) die("begin", luaretry_policy_errmsg(p));

  static loop lr, ns;
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, 2);
  lr.call = c;
  lr.start = ns.start = &start;
  pthread_t a, b;
  if (pthread_create(&a, NULL, run_loop, &lr) != 0 || pthread_create(&b, NULL, run_loop, &ns) != 0)
    die("pthread_create", "failed");
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  pthread_barrier_destroy(&start);
  if (lr.error) die("luaretry", lr.error);

  summary x = summarize(lr.late_us), y = summarize(ns.late_us);
  printf(
    "%d waits of %.0f to %.0f ms (uniform, seed 0x%x, %.2f s in all); both loops "
    "at once, one thread each\n\n",
    n_waits, MIN_MS, MAX_MS, (unsigned)SEED, total);
  printf("%-34s %20s %20s %10s\n", "lateness (measured - asked)", "luaretry_call_wait",
         "nanosleep baseline", "diff");
  printf("%-34s %17.1f us %17.1f us %7.1f us\n", "p50", x.p50, y.p50, x.p50 - y.p50);
  printf("%-34s %17.1f us %17.1f us %7.1f us\n", "p99", x.p99, y.p99, x.p99 - y.p99);
  printf("%-34s %17.1f us %17.1f us %7.1f us\n", "max", x.max, y.max, x.max - y.max);
  printf("%-34s %17.1f us %17.1f us %7.1f us\n", "mean", x.mean, y.mean, x.mean - y.mean);
  char e1[32], e2[32];
  snprintf(e1, sizeof e1, "%d %s", x.early, x.early ? "MISSED" : "ok");
  snprintf(e2, sizeof e2, "%d %s", y.early, y.early ? "MISSED" : "ok");
  printf("%-34s %20s %20s %10s\n", "waits that ended early (target 0)", e1, e2, "");

  luaretry_call_free(c);
  luaretry_policy_free(p);
  return 0; /* a MISSED target is reported, like decide.c's, not a failure */
}
