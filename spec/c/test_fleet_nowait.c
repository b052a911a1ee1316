/* test_fleet_nowait.c: the step API never waits for Redis (libluaretry(3)
 * "Threads"; the fleet's round trips are its worker thread's).  A policy
 * with every shared guard (budget, breaker, throttle, a fixed rate, hedge)
 * syncs with a real redis-server (redis_helper.h), which is then stopped
 * with SIGSTOP: with a command timeout of 5 s, a step that made a round
 * trip would wait 5 s.  Calls go on (successes, failures with their
 * pre-retry check, hedges) for twice the sync period's worth of round
 * trips; every step (begin, next, report, hedge, report_attempt) returns
 * within 1 s, where a round trip would take 5 s (the bench,
 * spec/bench/fleet_steps.c, measures the p99.9), and freeing the policy is
 * not held by the stopped Redis either.  A fork's child (Redis running) has no worker: its calls go on
 * under the local guards once the view is stale, and its exit waits for
 * nothing. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "redis_helper.h"
#include "step_support.h"

#ifdef __SANITIZE_THREAD__
#define SANITIZE_THREAD 1
#else
#define SANITIZE_THREAD 0
#endif

#define CALLS      200
#define BOUND      1.0 /* s: room for a busy machine; a round trip would be 5 s */
#define ROUND_TRIP 5.0

static const char *POLICY =
  "name = 'nowait'\n"
  "max_attempts = 3\n"
  "deadline = 30\n"
  "attempt_timeout = 5\n"
  "budget = { max_tokens = 1000, token_ratio = 0.5 }\n"
  "breaker = { failures = 1000000, open_seconds = 1 }\n"
  "admission = { k = 1000, window = 60 }\n"
  "rate = { limit = 100000, burst = 100 }\n"
  "hedge = { delay = 0.001, max = 1 }\n"
  "fleet = { sync = 5 }\n";

static double slowest;
static const char *slowest_step = "none";

static void timed(const char *step, double t0) {
  double t = redis_now_() - t0;
  if (t > slowest) slowest = t, slowest_step = step;
}

static void one_call(luaretry_policy *p, int i) {
  luaretry_call *c;
  double t0 = redis_now_();
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
  timed("begin", t0);
  luaretry_decision d;
  for (int attempt = 0; attempt < 3; attempt++) {
    t0 = redis_now_();
    CHECK_CODE(luaretry_call_next(c, &d), LUARETRY_OK);
    timed("next", t0);
    if (!d.retry) break;
    luaretry_outcome o = step_status(i % 3 == 0 ? 200 : 503);
    if (i % 8 == 0) { /* an attempt and its hedge */
      int id = 0;
      CHECK_CODE(luaretry_call_start(c, &id), LUARETRY_OK);
      redis_sleep_ms(2);
      t0 = redis_now_();
      CHECK_CODE(luaretry_call_hedge(c, &STEP_GET, &d), LUARETRY_OK);
      timed("hedge", t0);
      t0 = redis_now_();
      CHECK_CODE(luaretry_call_report_attempt(c, id, &o, &d), LUARETRY_OK);
      timed("report_attempt", t0);
    } else {
      t0 = redis_now_();
      CHECK_CODE(luaretry_call_report(c, &o, &d), LUARETRY_OK);
      timed("report", t0);
    }
    if (!d.retry) break;
  }
  luaretry_call_free(c);
}

/* In a fork's child: calls decided at once, on the local guards once the
 * view went stale; freeing the policy waits for no round trip.  The exit
 * status says which check failed (0: none). */
static int child(luaretry_policy *p) {
  redis_sleep_ms(100); /* stale_ms is 10 sync periods: 50 ms */
  double t0 = redis_now_();
  for (int i = 0; i < 50; i++) one_call(p, i);
  luaretry_metrics m;
  if (luaretry_policy_metrics(p, &m) != LUARETRY_OK || m.guards != LUARETRY_GUARDS_FALLBACK)
    return 2;
  if (slowest >= BOUND || redis_now_() - t0 >= ROUND_TRIP) return 3;
  luaretry_policy_free(p);
  return redis_now_() - t0 < 5 ? 0 : 4;
}

static void test_fork(const char *url) {
  luaretry_policy *p;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_set(p, "fleet.redis", url), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_load_string(p, "=nowait", POLICY), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_fleet_sync(p), LUARETRY_OK);
  for (int i = 0; i < 20; i++) one_call(p, i); /* the worker runs */
  slowest = 0;
  pid_t pid = fork();
  if (pid == 0) _exit(child(p));
  int status = -1;
  for (int i = 0; i < 1000 && waitpid(pid, &status, WNOHANG) == 0; i++) redis_sleep_ms(10);
  if (!CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    fprintf(stderr, "  the fork's child: status %d\n", status);
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  luaretry_policy_free(p);
}

/* No rate limiter, so no call asks Redis for a block and finds it slow:
 * the worker's round trip alone has waited for the stopped Redis when
 * the policy is freed.  The free cuts it short and must not reconnect to
 * wait a whole command timeout (5 s) for the last give-back: a round trip
 * cut short after the patience (eight round trips, at least 50 ms) says
 * Redis is slow. */
static const char *POLICY_NO_RATE =
  "name = 'nowait-norate'\n"
  "max_attempts = 3\n"
  "deadline = 30\n"
  "budget = { max_tokens = 1000, token_ratio = 0.5 }\n"
  "breaker = { failures = 1000000, open_seconds = 1 }\n"
  "fleet = { sync = 5 }\n";

/* A policy of `text` sharing its guards through the Redis at url, with a
 * command timeout of 5 s, synced once and warm (the worker has run). */
static luaretry_policy *stalling_policy(const char *url, const char *name, const char *text) {
  luaretry_policy *p;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_set(p, "fleet.redis", url), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_set(p, "fleet.command_timeout", "5000"), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_load_string(p, name, text), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_fleet_sync(p), LUARETRY_OK);
  for (int i = 0; i < 20; i++) one_call(p, i);
  return p;
}

static void test_free_after_stall(const char *url, redis_srv *srv) {
  luaretry_policy *p = stalling_policy(url, "=nowait-norate", POLICY_NO_RATE);
  redis_signal(srv, SIGSTOP);
  /* failures owed to Redis: the worker's next sync goes, and waits */
  for (int i = 0; i < 30; i++) {
    one_call(p, 1);
    redis_sleep_ms(10);
  }
  double t0 = redis_now_();
  luaretry_policy_free(p);
  double freed = redis_now_() - t0;
  if (!CHECK(freed < 1)) fprintf(stderr, "  free (no rate) took %.3f s\n", freed);
  redis_signal(srv, SIGCONT);
}

int main(void) {
  redis_srv srv;
  if (redis_start(&srv, (const char *)NULL) != 0) return 1;
  char url[100];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", srv.port);
  luaretry_policy *p = stalling_policy(url, "=nowait", POLICY);
  luaretry_metrics m;
  CHECK_CODE(luaretry_policy_metrics(p, &m), LUARETRY_OK);
  CHECK_EQ_INT((long)m.guards, (long)LUARETRY_GUARDS_FLEET);

  redis_signal(&srv, SIGSTOP);
  slowest = 0;
  double t0 = redis_now_();
  for (int i = 0; i < CALLS; i++) {
    one_call(p, i);
    redis_sleep_ms(1); /* over 200 ms: 40 sync periods, each a round trip asked */
  }
  double spent = redis_now_() - t0;
  if (!CHECK(slowest < BOUND))
    fprintf(stderr, "  slowest step with Redis stopped: %s, %.3f s\n", slowest_step, slowest);
  CHECK(spent < ROUND_TRIP); /* 200 steps, none a round trip */
  /* the worker's round trip still waits for the stopped Redis: the view
   * went stale (10 sync periods), the local guards decide meanwhile */
  CHECK_CODE(luaretry_policy_metrics(p, &m), LUARETRY_OK);
  CHECK_EQ_INT((long)m.guards, (long)LUARETRY_GUARDS_FALLBACK);
  /* freeing ends the worker's round trip at once */
  t0 = redis_now_();
  luaretry_policy_free(p);
  double freed = redis_now_() - t0;
  if (!CHECK(freed < 1)) fprintf(stderr, "  free took %.3f s\n", freed);
  redis_signal(&srv, SIGCONT);
  test_free_after_stall(url, &srv);
  /* ThreadSanitizer does not follow a threaded process into a fork */
  if (!SANITIZE_THREAD) test_fork(url);
  redis_stop(&srv);
  return check_done();
}
