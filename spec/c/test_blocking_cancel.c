/* test_blocking_cancel.c: the blocking call (luaretry_call_run) on the real
 * clock: cancelled from another thread and from a signal handler, waits that
 * never end early, an operation that gives up, the virtual clock, and two
 * threads each running their own policy. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "luaretry.h"
#include "check.h"

/* run returns within this of the cancel, where the backoff it cancels is
 * 5 s: room for a busy machine */
#define CANCEL_BOUND 1.0

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static luaretry_policy *load_str(const char *chunk, const char *src) {
  luaretry_policy *p = NULL;
  if (luaretry_policy_new(&p) != LUARETRY_OK) return NULL;
  if (luaretry_policy_load_string(p, chunk, src) != LUARETRY_OK) {
    fprintf(stderr, "load %s: %s\n", chunk, luaretry_policy_errmsg(p));
    luaretry_policy_free(p);
    return NULL;
  }
  return p;
}

static luaretry_call *begin(luaretry_policy *p, unsigned flags, uint64_t seed) {
  luaretry_call_options o;
  luaretry_call_options_init(&o);
  o.flags = flags;
  o.seed = seed;
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, &o, &c), LUARETRY_OK);
  return c;
}

/* An operation that answers from a list of statuses (the last repeats). */
typedef struct {
  const int *statuses;
  int count;
  int calls;
  int give_up_at; /* attempt that returns `give_up` instead; 0: none */
  luaretry_code give_up;
  double timeouts[8];   /* the timeouts the first attempts were given */
  double elapsed[1024]; /* luaretry_call_elapsed at each attempt */
} fake_op;

static luaretry_code operation(void *ud, luaretry_call *c, int attempt, double timeout,
                               luaretry_outcome *out) {
  fake_op *f = ud;
  f->calls++;
  if (attempt - 1 < 8) f->timeouts[attempt - 1] = timeout;
  if (attempt - 1 < 1024) f->elapsed[attempt - 1] = luaretry_call_elapsed(c);
  if (f->give_up_at && attempt == f->give_up_at) return f->give_up;
  int i = attempt - 1 < f->count ? attempt - 1 : f->count - 1;
  out->status = f->statuses[i];
  out->body = "";
  return LUARETRY_OK;
}

static const char LONG_BACKOFF[] =
  "name = \"slow\"\n"
  "max_attempts = 3\n"
  "backoff = { initial = 5, jitter = \"none\" }\n";

/* ---- (a) cancel from another thread */

typedef struct {
  luaretry_call *call;
  double delay;
  double cancelled_at;
} canceller;

static void *cancel_later(void *ud) {
  canceller *k = ud;
  struct timespec ts = { 0, (long)(k->delay * 1e9) };
  nanosleep(&ts, NULL);
  k->cancelled_at = now();
  luaretry_call_cancel(k->call);
  return NULL;
}

static void test_cancel_from_thread(void) {
  luaretry_policy *p = load_str("@slow.lua", LONG_BACKOFF);
  if (!CHECK(p != NULL)) return;
  luaretry_call *c = begin(p, 0, 0);
  static const int s503[] = { 503 };
  fake_op op = { .statuses = s503, .count = 1 };
  canceller k = { c, 0.1, 0 };
  pthread_t th;
  double t0 = now();
  CHECK_EQ_INT(pthread_create(&th, NULL, cancel_later, &k), 0);
  luaretry_decision final;
  luaretry_code rc = luaretry_call_run(c, operation, &op, &final);
  double returned = now();
  pthread_join(th, NULL);
  CHECK_CODE(rc, LUARETRY_OK);
  CHECK_EQ_INT(final.retry, 0);
  CHECK_EQ_INT(final.reason, LUARETRY_REASON_CANCELLED);
  CHECK_EQ_STR(luaretry_reason_name(final.reason), "cancelled");
  CHECK_EQ_INT(final.attempt, 1);
  CHECK_EQ_INT(op.calls, 1);
  CHECK(returned >= k.cancelled_at);
  CHECK(returned - k.cancelled_at < CANCEL_BOUND);
  CHECK(returned - t0 >= 0.1);
  CHECK_EQ_INT(luaretry_call_cancelled(c), 1);
  /* The call is over: another run or report is out of order. */
  CHECK_CODE(luaretry_call_run(c, operation, &op, &final), LUARETRY_E_STATE);
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  CHECK_CODE(luaretry_call_report(c, &o, &final), LUARETRY_E_STATE);
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* ---- (b) cancel from a signal handler */

static luaretry_call *volatile g_call;
static volatile sig_atomic_t g_signalled;
static int64_t volatile g_signal_ns;

static void on_alarm(int sig) {
  (void)sig;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts); /* async-signal-safe */
  g_signal_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  g_signalled = 1;
  luaretry_call_cancel(g_call);
}

static void test_cancel_from_signal(void) {
  luaretry_policy *p = load_str("@slow.lua", LONG_BACKOFF);
  if (!CHECK(p != NULL)) return;
  luaretry_call *c = begin(p, 0, 0);
  g_call = c;
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigemptyset(&sa.sa_mask);
  CHECK_EQ_INT(sigaction(SIGALRM, &sa, &old), 0);
  struct itimerval it = { { 0, 0 }, { 0, 100000 } }; /* once, in 100 ms */
  CHECK_EQ_INT(setitimer(ITIMER_REAL, &it, NULL), 0);

  static const int s503[] = { 503 };
  fake_op op = { .statuses = s503, .count = 1 };
  luaretry_decision final;
  int64_t t0 = now_ns();
  luaretry_code rc = luaretry_call_run(c, operation, &op, &final);
  int64_t returned = now_ns();

  struct itimerval off = { { 0, 0 }, { 0, 0 } };
  setitimer(ITIMER_REAL, &off, NULL);
  sigaction(SIGALRM, &old, NULL);
  CHECK_CODE(rc, LUARETRY_OK);
  CHECK_EQ_INT(g_signalled, 1);
  CHECK_EQ_INT(final.reason, LUARETRY_REASON_CANCELLED);
  CHECK_EQ_INT(op.calls, 1);
  CHECK(returned >= g_signal_ns);
  CHECK((double)(returned - g_signal_ns) * 1e-9 < CANCEL_BOUND);
  CHECK((double)(returned - t0) * 1e-9 >= 0.09);
  g_call = NULL;
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* ---- (c) a wait never ends early */

static void test_waits_not_early(void) {
  luaretry_policy *p = load_str("@slow.lua", LONG_BACKOFF);
  if (!CHECK(p != NULL)) return;
  luaretry_call *c = begin(p, 0, 0);
  int early = 0, failed = 0;
  double worst = 0;
  for (int i = 0; i < 200; i++) {
    /* 1 to 5 ms, with odd fractions: 1.000, 1.037, ... */
    double seconds = 0.001 + (double)((i * 37) % 4001) * 1e-6;
    int64_t t0 = now_ns();
    if (luaretry_call_wait(c, seconds) != LUARETRY_OK) failed++;
    int64_t took = now_ns() - t0;
    if ((double)took < seconds * 1e9) {
      early++;
      fprintf(stderr, "wait %d: asked %.9f s, took %.9f s\n", i, seconds, (double)took * 1e-9);
    }
    double over = (double)took * 1e-9 - seconds;
    if (over > worst) worst = over;
  }
  CHECK_EQ_INT(failed, 0);
  CHECK_EQ_INT(early, 0);
  printf("200 real waits of 1-5 ms: none early, worst overshoot %.3f ms\n", worst * 1e3);
  luaretry_call_free(c);

  /* The same through the blocking call: 20 attempts, 2 ms apart. */
  luaretry_policy *q =
    load_str("@quick.lua",
             "max_attempts = 20\n"
             "backoff = { kind = \"constant\", initial = 0.002, jitter = \"none\" }\n");
  if (CHECK(q != NULL)) {
    c = begin(q, 0, 0);
    static const int s500[] = { 500 };
    fake_op op = { .statuses = s500, .count = 1 };
    luaretry_decision final;
    int64_t t0 = now_ns();
    CHECK_CODE(luaretry_call_run(c, operation, &op, &final), LUARETRY_OK);
    double took = (double)(now_ns() - t0) * 1e-9;
    CHECK_EQ_INT(final.reason, LUARETRY_REASON_EXHAUSTED);
    CHECK_EQ_INT(final.attempt, 20);
    CHECK_EQ_INT(op.calls, 20);
    CHECK(took >= 19 * 0.002);
    for (int i = 1; i < 20; i++) CHECK(op.elapsed[i] - op.elapsed[i - 1] >= 0.002);
    luaretry_call_free(c);
    luaretry_policy_free(q);
  }
  luaretry_policy_free(p);
}

/* ---- (d) the operation gives up */

static void test_operation_gives_up(void) {
  luaretry_policy *p = load_str("@fast.lua",
                                "max_attempts = 5\ndeadline = 30\nattempt_timeout = 7\n"
                                "backoff = { initial = 0.5, jitter = \"none\" }\n");
  if (!CHECK(p != NULL)) return;
  static const int s503[] = { 503 };
  static const luaretry_code codes[] = { LUARETRY_E_OPERATION, LUARETRY_E_SYSTEM,
                                         LUARETRY_E_NOMEM };
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
    luaretry_call *c = begin(p, LUARETRY_CALL_VIRTUAL_TIME | LUARETRY_CALL_SEED, 1);
    fake_op op = { .statuses = s503, .count = 1, .give_up_at = 3, .give_up = codes[i] };
    luaretry_decision final;
    CHECK_CODE(luaretry_call_run(c, operation, &op, &final), codes[i]);
    CHECK_EQ_INT(op.calls, 3);
    CHECK_EQ_INT(final.retry, 0);
    CHECK_EQ_INT(final.attempt, 3);
    /* the host's operation gave up: not a cancel, which nobody asked for */
    CHECK_EQ_INT(final.reason, LUARETRY_REASON_GAVE_UP);
    CHECK_EQ_STR(luaretry_reason_name(final.reason), "gave_up");
    CHECK_CONTAINS(final.message, "the operation gave up");
    CHECK_CONTAINS(luaretry_call_errmsg(c), "gave up");
    CHECK_CONTAINS(luaretry_call_errmsg(c), luaretry_strerror(codes[i]));
    /* Timeouts handed to the operation: attempt_timeout, clipped. */
    CHECK_EQ_DBL(op.timeouts[0], 7);
    CHECK_EQ_DBL(op.elapsed[2], 1.5); /* waits 0.5 + 1 */
    CHECK_CODE(luaretry_call_run(c, operation, &op, &final), LUARETRY_E_STATE);
    luaretry_call_free(c);
  }
  luaretry_metrics m;
  luaretry_policy_metrics(p, &m);
  CHECK_EQ_INT((long)m.gave_up, 3);
  CHECK_EQ_INT((long)m.cancelled, 0);
  /* Success on the third attempt, for contrast. */
  static const int seq[] = { 503, 502, 204 };
  luaretry_call *c = begin(p, LUARETRY_CALL_VIRTUAL_TIME | LUARETRY_CALL_SEED, 1);
  fake_op op = { .statuses = seq, .count = 3 };
  luaretry_decision final;
  CHECK_CODE(luaretry_call_run(c, operation, &op, &final), LUARETRY_OK);
  CHECK_EQ_INT(final.reason, LUARETRY_REASON_SUCCESS);
  CHECK_EQ_INT(final.attempt, 3);
  CHECK_EQ_DBL(final.elapsed, 1.5);
  CHECK_EQ_DBL(luaretry_call_elapsed(c), 1.5);
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* ---- (e) the virtual clock: 1,000 attempts of a 0-64 s schedule */

typedef struct {
  long n;
  double sum;
} wait_sum;

static int add_wait(void *ud, const luaretry_decision *d) {
  wait_sum *s = ud;
  s->n++;
  s->sum += d->wait;
  return 0;
}

static void test_virtual_clock(void) {
  luaretry_policy *p =
    load_str("@long.lua",
             "max_attempts = 1000\n"
             "backoff = { initial = 1, multiplier = 2, max = 64, jitter = \"full\" }\n"
             "function is_transient(status) return status >= 500 end\n");
  if (!CHECK(p != NULL)) return;
  wait_sum expected = { 0, 0 };
  CHECK_CODE(luaretry_simulate(p, 7, 0, add_wait, &expected), LUARETRY_OK);
  CHECK_EQ_INT(expected.n, 1000);

  static const int s503[] = { 503 };
  fake_op *op = calloc(1, sizeof *op);
  if (!CHECK(op != NULL)) return;
  op->statuses = s503;
  op->count = 1;
  double t0 = now();
  luaretry_call *c = begin(p, LUARETRY_CALL_VIRTUAL_TIME | LUARETRY_CALL_SEED, 7);
  luaretry_decision final;
  CHECK_CODE(luaretry_call_run(c, operation, op, &final), LUARETRY_OK);
  double real = now() - t0;
  CHECK_EQ_INT(final.reason, LUARETRY_REASON_EXHAUSTED);
  CHECK_EQ_INT(final.attempt, 1000);
  CHECK_EQ_INT(op->calls, 1000);
  CHECK_EQ_DBL(final.elapsed, expected.sum); /* elapsed = sum of the waits */
  CHECK_EQ_DBL(luaretry_call_elapsed(c), expected.sum);
  CHECK(expected.sum > 1000 && expected.sum < 999 * 64);
  int in_range = 1;
  for (int i = 1; i < 1000; i++) {
    double w = op->elapsed[i] - op->elapsed[i - 1];
    if (!(w >= 0 && w <= 64)) in_range = 0;
  }
  CHECK(in_range);
  CHECK(real < 1.0);
  printf("1000 virtual attempts: %.0f s of schedule in %.1f ms of real time\n", final.elapsed,
         real * 1e3);
  free(op);
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* ---- (f) two threads, each with its own policy and calls */

typedef struct {
  const char *chunk, *src;
  int rounds;
  int loaded, ok, wrong;
  luaretry_reason reason;
  int attempt;
  double elapsed;
} worker;

static void *work(void *ud) {
  worker *w = ud;
  luaretry_policy *p = NULL;
  if (luaretry_policy_new(&p) != LUARETRY_OK) return NULL;
  if (luaretry_policy_load_string(p, w->chunk, w->src) == LUARETRY_OK) {
    w->loaded = 1;
    static const int seq[] = { 503, 503, 503, 200 };
    for (int r = 0; r < w->rounds; r++) {
      luaretry_call_options o;
      luaretry_call_options_init(&o);
      o.flags = LUARETRY_CALL_VIRTUAL_TIME | LUARETRY_CALL_SEED;
      o.seed = (uint64_t)r;
      luaretry_call *c = NULL;
      if (luaretry_call_begin(p, &o, &c) != LUARETRY_OK) {
        w->wrong++;
        continue;
      }
      fake_op op = { .statuses = seq, .count = 4 };
      luaretry_decision final;
      if (luaretry_call_run(c, operation, &op, &final) != LUARETRY_OK)
        w->wrong++;
      else if (r == 0) {
        w->reason = final.reason;
        w->attempt = final.attempt;
        w->elapsed = final.elapsed;
        w->ok++;
      } else if (final.reason == w->reason && final.attempt == w->attempt &&
                 final.elapsed == w->elapsed)
        w->ok++;
      else
        w->wrong++;
      luaretry_call_free(c);
    }
  }
  luaretry_policy_free(p);
  return NULL;
}

static void test_threads(void) {
  worker a = { "@a.lua",
               "max_attempts = 10\n"
               "backoff = { initial = 1, multiplier = 3, jitter = \"none\" }\n"
               "function is_transient(status) return status == 503 end\n",
               300,
               0,
               0,
               0,
               0,
               0,
               0 };
  worker b = { "@b.lua",
               "max_attempts = 3\n"
               "backoff = { kind = \"linear\", initial = 2, step = 0.5,"
               " jitter = \"none\" }\n"
               "function is_transient(status, body, info)\n"
               "  return status == 503 and info.attempt < 10\n"
               "end\n",
               300,
               0,
               0,
               0,
               0,
               0,
               0 };
  pthread_t ta, tb;
  CHECK_EQ_INT(pthread_create(&ta, NULL, work, &a), 0);
  CHECK_EQ_INT(pthread_create(&tb, NULL, work, &b), 0);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  CHECK_EQ_INT(a.loaded, 1);
  CHECK_EQ_INT(b.loaded, 1);
  CHECK_EQ_INT(a.ok, 300);
  CHECK_EQ_INT(a.wrong, 0);
  CHECK_EQ_INT(b.ok, 300);
  CHECK_EQ_INT(b.wrong, 0);
  /* a: 503 x3 then 200: success at 4 after 1 + 3 + 9. */
  CHECK_EQ_INT(a.reason, LUARETRY_REASON_SUCCESS);
  CHECK_EQ_INT(a.attempt, 4);
  CHECK_EQ_DBL(a.elapsed, 13);
  /* b: exhausted at 3 after 2 + 2.5. */
  CHECK_EQ_INT(b.reason, LUARETRY_REASON_EXHAUSTED);
  CHECK_EQ_INT(b.attempt, 3);
  CHECK_EQ_DBL(b.elapsed, 4.5);
}

int main(void) {
  test_cancel_from_thread();
  test_cancel_from_signal();
  test_waits_not_early();
  test_operation_gives_up();
  test_virtual_clock();
  test_threads();
  return check_done();
}
