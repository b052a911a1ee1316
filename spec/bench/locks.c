/* locks.c: the guards' short locks under more threads than cores (issue
 * 28, finding 10).  THREADS threads decide on one policy whose admission,
 * rate limiter and breaker window take a lock on every decision (a 503,
 * then a 200, a call of two attempts), with the C classifier so that the
 * locks are most of the work.  Printed: decisions per second of wall time
 * and CPU seconds per million decisions (a waiter spinning on a preempted
 * holder burns its time slice: CPU time grows, decisions do not).
 *
 *   bench_locks [THREADS [DECISIONS_EACH]]   (default 8 threads, 200,000 each) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "luaretry.h"

static luaretry_policy *policy;
static long each = 200000;

static double clock_of(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static luaretry_class classify(void *ud, const luaretry_outcome *o, int attempt, double *wait) {
  (void)ud;
  (void)attempt;
  (void)wait;
  return o->status == 200 ? LUARETRY_CLASS_SUCCESS : LUARETRY_CLASS_TRANSIENT;
}

static void *run(void *arg) {
  (void)arg;
  luaretry_outcome busy, ok;
  luaretry_outcome_init(&busy);
  busy.status = 503;
  ok = busy;
  ok.status = 200;
  luaretry_call_options o;
  luaretry_call_options_init(&o);
  o.flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME;
  luaretry_call *c = NULL;
  for (long i = 0; i < each; i++) {
    luaretry_decision d;
    if (!c) {
      o.seed = (uint64_t)i;
      luaretry_call_begin(policy, &o, &c);
    }
    luaretry_call_report(c, i % 2 ? &ok : &busy, &d);
    if (d.retry) {
      luaretry_call_wait(c, d.wait);
    } else {
      luaretry_call_free(c);
      c = NULL;
    }
  }
  luaretry_call_free(c);
  return NULL;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 8;
  if (argc > 2) each = atol(argv[2]);
  if (threads < 1 || threads > 64) threads = 8;
  luaretry_policy_new(&policy);
  const char *src =
    "max_attempts = 5\ndeadline = 600\nattempt_timeout = 10\n"
    "backoff = { initial = 0.001, jitter = 'full' }\n"
    "throttle = { k = 2, window = 60 }\n"
    "rate = { limit = 1e9, burst = 1000000 }\n"
    "breaker = { failures = 1000000, failure_rate = 0.99, window = 100 }\n";
  if (luaretry_policy_load_string(policy, "=locks", src) != LUARETRY_OK) {
    fprintf(stderr, "%s\n", luaretry_policy_errmsg(policy));
    return 1;
  }
  luaretry_policy_set_classifier(policy, classify, NULL);
  pthread_t t[64];
  double w0 = clock_of(CLOCK_MONOTONIC), c0 = clock_of(CLOCK_PROCESS_CPUTIME_ID);
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, run, NULL);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  double wall = clock_of(CLOCK_MONOTONIC) - w0, cpu = clock_of(CLOCK_PROCESS_CPUTIME_ID) - c0;
  double n = (double)threads * (double)each;
  printf(
    "bench_locks: %d threads x %ld decisions: %.0f decisions/s (wall %.2f s), "
    "%.3f CPU s per million decisions\n",
    threads, each, n / wall, wall, cpu / n * 1e6);
  luaretry_policy_free(policy);
  return 0;
}
