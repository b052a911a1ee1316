/* test_threads.c: one loaded policy serving many threads at once, through
 * the step API and the blocking call; the shared budget and counters stay
 * exact; a cancel from another thread (or a signal handler there) stops a
 * script busy for the call.  `make test` also runs it under
 * ThreadSanitizer. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "luaretry.h"

#define THREADS   8
#define DECISIONS 100000
#define PER_CALL  10 /* 9 transient outcomes, then a success */

/* A Lua classifier that reads its arguments, so every decision runs in a
 * Lua state: 503 is transient, anything else final. */
static const char POLICY[] =
  "name = 'threads'\n"
  "max_attempts = 1000\n"
  "backoff = { initial = 0.5, jitter = 'full', max = 4 }\n"
  "function is_transient(status, body, info)\n"
  "  return status == 503 and info.attempt < 1000 and #body == 4\n"
  "end\n";

typedef struct {
  luaretry_policy *p;
  int id;
  long calls; /* step_worker: calls to make; 0: DECISIONS / PER_CALL */
  long decisions, retries, successes, failures;
} worker;

static void *step_worker(void *arg) {
  worker *w = arg;
  luaretry_call_options opt;
  luaretry_call_options_init(&opt);
  opt.flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME;
  long calls = w->calls ? w->calls : DECISIONS / PER_CALL;
  for (long n = 0; n < calls; n++) {
    opt.seed = (uint64_t)(w->id * 1000003L + n);
    luaretry_call *c;
    if (luaretry_call_begin(w->p, &opt, &c) != LUARETRY_OK) {
      w->failures++;
      continue;
    }
    for (int a = 1; a <= PER_CALL; a++) {
      luaretry_outcome o;
      luaretry_outcome_init(&o);
      o.status = a < PER_CALL ? 503 : 200;
      o.body = "busy";
      o.body_len = 4;
      luaretry_decision d;
      if (luaretry_call_report(c, &o, &d) != LUARETRY_OK) {
        w->failures++;
        break;
      }
      w->decisions++;
      if (d.retry) {
        w->retries++;
        /* full jitter: a wait in [0, min(0.5 * 2^n, 4)] */
        if (!(d.wait >= 0 && d.wait <= 4)) w->failures++;
        luaretry_call_wait(c, d.wait);
      } else if (d.reason == LUARETRY_REASON_SUCCESS) {
        w->successes++;
      } else {
        w->failures++;
      }
    }
    luaretry_call_free(c);
  }
  return NULL;
}

static luaretry_code flaky(void *ud, luaretry_call *c, int attempt, double timeout,
                           luaretry_outcome *out) {
  (void)ud, (void)c, (void)timeout;
  /* a quota far from spent: rate.headers takes its lock, never a wait */
  static const luaretry_header quota[] = { { "ratelimit", "\"q\";r=1000000;t=1" } };
  out->status = attempt < 3 ? 503 : 200;
  out->body = "busy";
  out->body_len = 4;
  out->headers = quota;
  out->header_count = 1;
  return LUARETRY_OK;
}

/* Call n of a 2000-call worker, on the virtual clock; NULL (a failure
 * counted) when it cannot begin. */
static luaretry_call *begin_nth(worker *w, long n) {
  luaretry_call_options opt = { .flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME,
                                .seed = (uint64_t)n };
  luaretry_call *c;
  if (luaretry_call_begin(w->p, &opt, &c) == LUARETRY_OK) return c;
  w->failures++;
  return NULL;
}

static void *blocking_worker(void *arg) {
  worker *w = arg;
  for (long n = 0; n < 2000; n++) {
    luaretry_call *c = begin_nth(w, n);
    if (!c) continue;
    luaretry_decision d;
    if (luaretry_call_run(c, flaky, NULL, &d) != LUARETRY_OK ||
        d.reason != LUARETRY_REASON_SUCCESS || d.attempt != 3)
      w->failures++;
    else
      w->successes++;
    luaretry_call_free(c);
  }
  return NULL;
}

/* An adaptive rate from every thread: not limited yet, each send and
 * success is counted without the pace's lock; one call in 50 meets a 429
 * (retried), and the first of them limits the rate while the other
 * threads still count.  Every call ends in a success. */
static const char ADAPTIVE[] =
  "max_attempts = 3\n"
  "backoff = { initial = 0.01, max = 0.01 }\n"
  "rate = { adaptive = true }\n"
  "function is_transient(status) return status == 429 end\n";

static void *adaptive_worker(void *arg) {
  worker *w = arg;
  for (long n = 0; n < 2000; n++) {
    luaretry_call *c = begin_nth(w, n);
    luaretry_decision d;
    if (!c) continue;
    int throttled = (n + w->id) % 50 == 7;
    for (int a = 1; a <= 2 && luaretry_call_next(c, &d) == LUARETRY_OK && d.retry; a++) {
      luaretry_call_wait(c, d.wait); /* the rate's wait, once limited */
      luaretry_outcome o;
      luaretry_outcome_init(&o);
      o.status = throttled && a == 1 ? 429 : 200;
      if (luaretry_call_report(c, &o, &d) != LUARETRY_OK) break;
      if (!d.retry) break;
      luaretry_call_wait(c, d.wait);
    }
    if (d.reason == LUARETRY_REASON_SUCCESS)
      w->successes++;
    else
      w->failures++;
    luaretry_call_free(c);
  }
  return NULL;
}

/* Call n's one attempt, reported with `status` and freed; 1 when it was
 * reported (a 200: and was a success). */
static int one_attempt(worker *w, long n, int status) {
  luaretry_call *c = begin_nth(w, n);
  luaretry_decision d;
  if (!c) return 0;
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.status = status;
  int ok = luaretry_call_next(c, &d) == LUARETRY_OK && d.retry &&
           luaretry_call_report(c, &o, &d) == LUARETRY_OK &&
           (status != 200 || d.reason == LUARETRY_REASON_SUCCESS);
  luaretry_call_free(c);
  return ok;
}

static void *succeeding_worker(void *arg) {
  worker *w = arg;
  for (long n = 0; n < w->calls; n++)
    one_attempt(w, w->id * 1000003L + n, 200) ? w->successes++ : w->failures++;
  return NULL;
}

static void run_threads_of(void *(*fn)(void *), worker *w, luaretry_policy *p, long calls) {
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].p = p;
    w[i].id = i;
    w[i].calls = calls;
    pthread_create(&t[i], NULL, fn, &w[i]);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
}

static void run_threads(void *(*fn)(void *), worker *w, luaretry_policy *p) {
  run_threads_of(fn, w, p, 0);
}

/* Threads failing on one policy at once: each reads its own message,
 * whole (a setting of a name of its own that does not exist), never
 * another thread's. */
typedef struct {
  luaretry_policy *p;
  int id, own, other;
} err_worker;

static void *error_worker(void *arg) {
  err_worker *w = arg;
  char name[32], want[48];
  snprintf(name, sizeof name, "no_such_field_%d", w->id);
  snprintf(want, sizeof want, "%s: unknown name", name);
  for (int i = 0; i < 2000; i++) {
    if (luaretry_policy_set(w->p, name, "1") != LUARETRY_E_ARG) continue;
    const char *msg = luaretry_policy_errmsg(w->p);
    if (strncmp(msg, want, strlen(want)) == 0)
      w->own++;
    else
      w->other++;
  }
  return NULL;
}

static void test_errors_of_threads(luaretry_policy *p) {
  err_worker w[THREADS];
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (err_worker){ p, i, 0, 0 };
    pthread_create(&t[i], NULL, error_worker, &w[i]);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(t[i], NULL);
    CHECK_EQ_INT(w[i].own, 2000);
    CHECK_EQ_INT(w[i].other, 0);
  }
  /* this thread failed on nothing: no message of another thread */
  CHECK_EQ_STR(luaretry_policy_errmsg(p), "");
}

/* A budget the threads share: each thread's successes give their shares
 * on a stripe of its own, a whole token at a time into the count, and the
 * budget is the count and every stripe's.  50 failures take 100 tokens to
 * 50; then 8 threads x 53 successes give back 0.1 each, 42.4 tokens in
 * all, never over the max: the budget reads 92.4 exactly, though a thread
 * that owns its stripe still holds 0.3 of a token there. */
static const char *const BUDGETED =
  "name = 'budgeted'\n"
  "max_attempts = 2\n"
  "budget = { max_tokens = 100, token_ratio = 0.1 }\n"
  "function is_transient(status) return status == 503 end\n";

static void test_budget_of_threads(void) {
  luaretry_policy *p = NULL;
  worker w[THREADS];
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  if (!CHECK_CODE(luaretry_policy_load_string(p, "=budgeted", BUDGETED), LUARETRY_OK)) {
    luaretry_policy_free(p);
    return;
  }
  worker one = { .p = p };
  int reported = 0;
  for (long n = 0; n < 50; n++) reported += one_attempt(&one, n, 503);
  CHECK_EQ_INT(reported, 50);
  luaretry_metrics m;
  luaretry_policy_metrics(p, &m);
  CHECK_NEAR(m.budget_tokens, 50, 1e-9);
  run_threads_of(succeeding_worker, w, p, 53);
  long ok = 0;
  for (int i = 0; i < THREADS; i++) ok += w[i].successes;
  CHECK_EQ_INT(ok, THREADS * 53L);
  luaretry_policy_metrics(p, &m);
  CHECK_NEAR(m.budget_tokens, 92.4, 1e-9);
  luaretry_policy_free(p);
}

/* Reloads while calls decide (helper-77's random threads under TSan): a
 * reload wrote the shared budget's settings as a plain struct while a
 * call read its max_tokens to report the budget, with no lock between. */
static const char *const RELOADED[2] = {
  "max_attempts = 3\nbudget = { max_tokens = 10, token_ratio = 0.1 }\n"
  "backoff = { initial = 0, jitter = 'none' }\n",
  "max_attempts = 3\nbudget = { max_tokens = 20, token_ratio = 0.1 }\n"
  "backoff = { initial = 0, jitter = 'none' }\n",
};

static void *deciding(void *arg) {
  luaretry_policy *p = arg;
  luaretry_call_options o;
  luaretry_call_options_init(&o);
  o.flags = LUARETRY_CALL_VIRTUAL_TIME;
  luaretry_outcome out;
  luaretry_outcome_init(&out);
  out.status = 503;
  for (int i = 0; i < 400; i++) {
    luaretry_call *c;
    if (luaretry_call_begin(p, &o, &c) != LUARETRY_OK) continue;
    luaretry_decision d;
    for (int k = 0; k < 3 && luaretry_call_report(c, &out, &d) == LUARETRY_OK && d.retry; k++)
      luaretry_call_wait(c, d.wait);
    luaretry_call_free(c);
  }
  return NULL;
}

static void test_reload_beside_calls(void) {
  luaretry_policy *p;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_load_string(p, "=r0", RELOADED[0]), LUARETRY_OK);
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, deciding, p);
  for (int i = 0; i < 100; i++)
    CHECK_CODE(luaretry_policy_load_string(p, "=r", RELOADED[i % 2]), LUARETRY_OK);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  luaretry_metrics m;
  CHECK_CODE(luaretry_policy_metrics(p, &m), LUARETRY_OK);
  CHECK(m.budget_tokens >= 0 && m.budget_tokens <= 20);
  luaretry_policy_free(p);
}

/* ---- a cancel reaches a busy script */

/* Hooks that never end unless stopped: is_transient in a Lua loop (503)
 * or in the pattern matcher (504), is_idempotent and prepare for a URL
 * with "spin" in it.  Each prints first: the canceller waits for that. */
static const char BUSY[] =
  "name = 'busy'\n"
  "max_attempts = 3\n"
  "function is_transient(status, body, info)\n"
  "  if status == 503 then print('busy') while true do end end\n"
  "  if status == 504 then\n"
  "    print('busy') local s = string.rep('a', 20000)\n"
  "    while true do s:find('.-.-.-b') end\n"
  "  end\n"
  "  return status == 500\n"
  "end\n"
  "function is_idempotent(r)\n"
  "  if r.url:find('spin', 1, true) then print('busy') while true do end end\n"
  "  return true\n"
  "end\n"
  "function prepare(r, attempt)\n"
  "  if r.url:find('spin', 1, true) then print('busy') while true do end end\n"
  "end\n";

/* The time limit is 10 s (a kill at 8 s); the cancel must stop the script
 * well before that, measured from the cancel: a bound for a busy machine
 * (two cores shared, ThreadSanitizer), where a tick of the watchdog (5 ms)
 * is what it takes here. */
#define BUSY_LIMIT   "10"
#define CANCEL_BOUND 4.0

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static atomic_int busy_printed;           /* a hook printed: it is in its loop */
static luaretry_call *volatile to_cancel; /* for the signal handler */

static void on_busy(void *ud, const char *line) {
  (void)ud, (void)line;
  atomic_store(&busy_printed, 1);
}

static void cancel_on_signal(int sig) {
  (void)sig;
  luaretry_call_cancel(to_cancel);
}

typedef struct {
  luaretry_call *c;
  int by_signal; /* cancel from a signal handler on this thread */
  int saw_busy;
  double cancelled_at;
} canceller;

/* Waits (at most 30 s) until the script is busy, then cancels. */
static void *cancel_when_busy(void *arg) {
  canceller *k = arg;
  const struct timespec ms = { 0, 1000000 };
  for (int i = 0; i < 30000 && !atomic_load(&busy_printed); i++) nanosleep(&ms, NULL);
  k->saw_busy = atomic_load(&busy_printed);
  k->cancelled_at = mono();
  if (k->by_signal) {
    to_cancel = k->c;
    pthread_kill(pthread_self(), SIGUSR1); /* the handler runs here, now */
  } else {
    luaretry_call_cancel(k->c);
  }
  return NULL;
}

static void start_canceller(pthread_t *t, canceller *k, luaretry_call *c, int by_signal) {
  atomic_store(&busy_printed, 0);
  *k = (canceller){ c, by_signal, 0, 0 };
  pthread_create(t, NULL, cancel_when_busy, k);
}

/* The canceller's cancel ended the busy hook in time. */
static void check_stopped_in_time(pthread_t t, const canceller *k, const char *what) {
  double returned = mono();
  pthread_join(t, NULL);
  CHECK(k->saw_busy);
  if (!CHECK(returned - k->cancelled_at < CANCEL_BOUND))
    fprintf(stderr, "%s: returned %.3f s after the cancel\n", what, returned - k->cancelled_at);
}

static luaretry_call *busy_call(luaretry_policy *p) {
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
  return c;
}

/* is_transient busy with status `status`, cancelled by another thread (or
 * a signal handler on it): the decision stops the call, and says why. */
static void test_cancel_busy_judge(luaretry_policy *p, int status, int by_signal) {
  luaretry_call *c = busy_call(p);
  if (!c) return;
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.status = status;
  o.body = "busy";
  o.body_len = 4;
  pthread_t t;
  canceller k;
  start_canceller(&t, &k, c, by_signal);
  luaretry_decision d;
  luaretry_code rc = luaretry_call_report(c, &o, &d);
  check_stopped_in_time(t, &k, "is_transient");
  CHECK_CODE(rc, LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 0);
  CHECK(luaretry_call_cancelled(c));
  /* the call stops as cancelled: the script's stop is not a policy error */
  CHECK_EQ_INT((int)d.reason, (int)LUARETRY_REASON_CANCELLED);
  CHECK_CONTAINS(d.message, "is_transient: ");
  CHECK_CONTAINS(d.message, ": stopped: the call was cancelled");
  luaretry_call_free(c);
}

/* The call's own prepare and is_idempotent: LUARETRY_E_CANCELLED. */
static void test_cancel_busy_request(luaretry_policy *p) {
  luaretry_request r;
  luaretry_request_init(&r);
  r.method = "GET";
  r.url = "http://127.0.0.1:20100/spin";
  for (int which = 0; which < 2; which++) {
    luaretry_call *c = busy_call(p);
    if (!c) return;
    pthread_t t;
    canceller k;
    start_canceller(&t, &k, c, 0);
    luaretry_request out;
    int yes = 0;
    luaretry_code rc =
      which ? luaretry_call_prepare(c, &r, 1, &out) : luaretry_call_is_idempotent(c, &r, &yes);
    check_stopped_in_time(t, &k, which ? "prepare" : "is_idempotent");
    CHECK_CODE(rc, LUARETRY_E_CANCELLED);
    CHECK_CONTAINS(luaretry_call_errmsg(c), which ? "prepare: " : "is_idempotent: ");
    CHECK_CONTAINS(luaretry_call_errmsg(c), ": stopped: the call was cancelled");
    luaretry_call_free(c);
  }
}

/* After the cancels the states serve the next calls as before: nothing
 * was left half done, and no cancel outlives its call. */
static void test_after_cancels(luaretry_policy *p) {
  luaretry_call *c = busy_call(p);
  if (!c) return;
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.status = 500;
  luaretry_decision d;
  CHECK_CODE(luaretry_call_report(c, &o, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 1);
  luaretry_request r, out;
  luaretry_request_init(&r);
  r.method = "GET";
  r.url = "http://127.0.0.1:20100/calm";
  int yes = 0;
  CHECK_CODE(luaretry_call_is_idempotent(c, &r, &yes), LUARETRY_OK);
  CHECK_EQ_INT(yes, 1);
  CHECK_CODE(luaretry_call_prepare(c, &r, 2, &out), LUARETRY_OK);
  luaretry_call_free(c);
}

static void test_cancel_busy_scripts(void) {
  luaretry_policy *p = NULL;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_set(p, "time_limit", BUSY_LIMIT), LUARETRY_OK);
  luaretry_policy_on_log(p, on_busy, NULL);
  if (!CHECK_CODE(luaretry_policy_load_string(p, "=busy", BUSY), LUARETRY_OK)) {
    fprintf(stderr, "%s\n", luaretry_policy_errmsg(p));
    luaretry_policy_free(p);
    return;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = cancel_on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);
  test_cancel_busy_judge(p, 503, 0); /* a Lua loop */
  test_cancel_busy_judge(p, 504, 0); /* the pattern matcher */
  test_cancel_busy_judge(p, 503, 1); /* from a signal handler */
  test_cancel_busy_request(p);
  test_after_cancels(p);
  signal(SIGUSR1, SIG_DFL);
  luaretry_policy_free(p);
}

int main(void) {
  test_cancel_busy_scripts();
  test_budget_of_threads(); /* first: most of its threads own a stripe */
  test_reload_beside_calls();
  luaretry_policy *p;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  /* what is tested here is not time: a busy machine (two cores shared,
   * ASan) may preempt one of its many hooks past the 0.25 s time limit */
  CHECK_CODE(luaretry_policy_set(p, "time_limit", "60"), LUARETRY_OK);
  if (!CHECK_CODE(luaretry_policy_load_string(p, "=threads", POLICY), LUARETRY_OK)) {
    fprintf(stderr, "%s\n", luaretry_policy_errmsg(p));
    return check_done();
  }

  test_errors_of_threads(p);

  /* 8 threads x 100,000 decisions through the step API */
  worker w[THREADS];
  run_threads(step_worker, w, p);
  long decisions = 0, retries = 0, successes = 0;
  for (int i = 0; i < THREADS; i++) {
    CHECK_EQ_INT(w[i].failures, 0);
    CHECK_EQ_INT(w[i].decisions, DECISIONS);
    decisions += w[i].decisions;
    retries += w[i].retries;
    successes += w[i].successes;
  }
  luaretry_metrics m;
  CHECK_CODE(luaretry_policy_metrics(p, &m), LUARETRY_OK);
  CHECK_EQ_INT((long)m.attempts, decisions);
  CHECK_EQ_INT((long)m.retries, retries);
  CHECK_EQ_INT((long)m.successes, successes);
  CHECK_EQ_INT((long)m.calls, (long)THREADS * DECISIONS / PER_CALL);
  CHECK_EQ_INT((long)m.successes, (long)THREADS * DECISIONS / PER_CALL);
  CHECK_EQ_INT((long)m.retries, (long)THREADS * DECISIONS / PER_CALL * (PER_CALL - 1));

  /* more threads than there are stripes to own: the first to count own
   * one (its only writer), later ones share the rest; waves of THREADS
   * threads, each after the last ended, still count every decision */
  luaretry_metrics wave0;
  luaretry_policy_metrics(p, &wave0);
  long wave_decisions = 0;
  for (int wave = 0; wave < 5; wave++) {
    run_threads_of(step_worker, w, p, 100);
    for (int i = 0; i < THREADS; i++) {
      CHECK_EQ_INT(w[i].failures, 0);
      wave_decisions += w[i].decisions;
    }
  }
  luaretry_metrics wave1;
  CHECK_CODE(luaretry_policy_metrics(p, &wave1), LUARETRY_OK);
  CHECK_EQ_INT(wave_decisions, 5L * THREADS * 100 * PER_CALL);
  CHECK_EQ_INT((long)(wave1.attempts - wave0.attempts), wave_decisions);
  CHECK_EQ_INT((long)(wave1.calls - wave0.calls), 5L * THREADS * 100);

  /* the blocking call too, on the same policy, with a shared budget:
   * each call fails twice then succeeds, so tokens go -2 + 0.5 a call and
   * the budget must refuse some retries; every count must add up */
  CHECK_CODE(luaretry_policy_set(p, "budget.max_tokens", "1000"), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_set(p, "budget.token_ratio", "0.5"), LUARETRY_OK);
  luaretry_metrics before, after;
  luaretry_policy_metrics(p, &before);
  run_threads(blocking_worker, w, p);
  luaretry_policy_metrics(p, &after);
  long ok = 0, refused = 0;
  for (int i = 0; i < THREADS; i++) ok += w[i].successes, refused += w[i].failures;
  CHECK_EQ_INT(ok + refused, THREADS * 2000L);
  CHECK_EQ_INT((long)(after.successes - before.successes), ok);
  CHECK_EQ_INT((long)(after.budget_refusals - before.budget_refusals), refused);
  CHECK(refused > 0);
  CHECK(after.budget_tokens >= 0 && after.budget_tokens <= 1000);

  /* a reload while no call runs keeps the counters and serves at once */
  CHECK_CODE(luaretry_policy_load_string(p, "=threads2", POLICY), LUARETRY_OK);
  luaretry_policy_metrics(p, &after);
  CHECK((long)after.calls >= (long)THREADS * (DECISIONS / PER_CALL + 2000));

  /* the load guards under threads: the rate breaker's window, the
   * throttle's buckets, the rate limiter's bucket and the server's quota
   * (rate.headers) take their spin locks from every thread; every call ends, and every stop is counted */
  static const char *const load[][2] = {
    { "breaker.failure_rate", "0.9" },
    { "breaker.window", "50" },
    { "breaker.open_seconds", "0.001" },
    { "admission.k", "2" },
    { "rate.limit", "1e6" },
    { "rate.headers", "true" }, /* the server's quota's lock too */
  };
  for (size_t k = 0; k < sizeof load / sizeof load[0]; k++)
    CHECK_CODE(luaretry_policy_set(p, load[k][0], load[k][1]), LUARETRY_OK);
  long budget_refused = refused;
  luaretry_policy_metrics(p, &before);
  run_threads(blocking_worker, w, p);
  luaretry_policy_metrics(p, &after);
  ok = refused = 0;
  for (int i = 0; i < THREADS; i++) ok += w[i].successes, refused += w[i].failures;
  CHECK_EQ_INT(ok + refused, THREADS * 2000L);
  CHECK_EQ_INT((long)(after.successes - before.successes), ok);
  /* two failures for a success: the service accepts a third of the
   * requests, below 1 / k: the throttle refuses most calls */
  CHECK(after.admission_refusals > before.admission_refusals);
  CHECK(luaretry_policy_rate(p) == 1e6);

  luaretry_policy *q = NULL;
  CHECK_CODE(luaretry_policy_new(&q), LUARETRY_OK);
  if (CHECK_CODE(luaretry_policy_load_string(q, "=adaptive", ADAPTIVE), LUARETRY_OK)) {
    CHECK(luaretry_policy_rate(q) == 0); /* not limited yet */
    run_threads(adaptive_worker, w, q);
    ok = refused = 0;
    for (int i = 0; i < THREADS; i++) ok += w[i].successes, refused += w[i].failures;
    CHECK_EQ_INT(ok, THREADS * 2000L);
    CHECK_EQ_INT(refused, 0);
    CHECK(luaretry_policy_rate(q) > 0); /* the 429s limited it */
  }
  luaretry_policy_free(q);

  printf("%d threads x %d decisions on one policy: %ld attempts counted, %ld budget refusals\n",
         THREADS, DECISIONS, (long)m.attempts, budget_refused);
  luaretry_policy_free(p);
  return check_done();
}
