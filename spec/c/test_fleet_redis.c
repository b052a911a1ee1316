/* test_fleet_redis.c: the fleet's guards against a real redis-server.  Two
 * handles with different registry members stand for two processes (each
 * has its own connection; Redis cannot tell them from two hosts).
 *
 * Semantics: the budget spent by one is refused to the other; a breaker
 * opened by one is seen by the other within a sync period; half-open
 * probes are limited fleet-wide, and a permit handed back stays within
 * `probes` (the process's, then the fleet's when its handle closes);
 * SCRIPT FLUSH is survived (EVALSHA falls back to EVAL) on both paths
 * without losing a delta; threads lose no delta.  Failures: a server
 * that never answers, a stopped (SIGSTOP) and a killed server, a wrong
 * password, an unreachable port, a read-only replica, a full listen
 * backlog: each bounded by the deadlines, reported once, never with a
 * credential, and recovered from when the server is back.  Every loop is
 * bounded in rounds and time. */
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet_internal.h" /* lr_fleet_reserve_take */
#include "remote_guard.h"   /* lr_fleet_remote_ops */
#include "check.h"
#include "redis_helper.h"
#include "fleet_handle.h"

static double now_s(void) { return redis_now_(); }

static lr_fleet_settings test_settings(void) {
  lr_fleet_settings s;
  lr_fleet_settings_init(&s);
  s.budget = 1;
  s.max_tokens = 10;
  s.token_ratio = 0.1;
  s.breaker = 1;
  s.failures = 3;
  s.open_seconds = 1;
  s.probes = 1;
  s.connect_timeout_ms = 300;
  s.command_timeout_ms = 250; /* generous: the ASan build is slower */
  s.sync_ms = 50;
  s.reconnect_min_ms = 50;
  s.reconnect_max_ms = 200;
  return s;
}

static char URL[160], UNIX_URL[200];

static void reset(lr_fleet *f) {
  char err[300] = "";
  if (!CHECK_EQ_INT(lr_fleet_reset(f, err, sizeof err), LR_FLEET_OK))
    fprintf(stderr, "  reset: %s\n", err);
}

static lr_fleet_status status_of(lr_fleet *f) {
  lr_fleet_status st;
  char err[300] = "";
  if (!CHECK_EQ_INT(lr_fleet_status_get(f, &st, err, sizeof err), LR_FLEET_OK))
    fprintf(stderr, "  status: %s\n", err);
  return st;
}

static void fail_and_sync(lr_fleet *f, int n) {
  for (int i = 0; i < n; i++) {
    lr_fleet_record(f, LR_FLEET_FAILURE);
    CHECK_EQ_INT(lr_fleet_sync_now(f), LR_FLEET_OK);
  }
}

/* ---- semantics */

static void test_budget_shared(void) {
  lr_fleet *a = handle(URL, "budget", "host-a:1", test_settings(), NULL);
  lr_fleet *b = handle(URL, "budget", "host-b:2", test_settings(), NULL);
  reset(a);
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  CHECK_EQ_INT(lr_fleet_sync_now(b), LR_FLEET_OK);
  CHECK_EQ_INT(lr_fleet_budget_allows_retry(b), 1); /* 10 tokens */
  fail_and_sync(a, 4);                              /* a spends 4 */
  CHECK_EQ_INT(lr_fleet_sync_now(b), LR_FLEET_OK);
  CHECK_EQ_INT(lr_fleet_budget_allows_retry(b), 1); /* 6 > 5 */
  fail_and_sync(a, 1);                              /* 5: half, not more */
  CHECK_EQ_INT(lr_fleet_budget_allows_retry(a), 0);
  CHECK_EQ_INT(lr_fleet_sync_now(b), LR_FLEET_OK);
  CHECK_EQ_INT(lr_fleet_budget_allows_retry(b), 0); /* b spent nothing */
  lr_fleet_view v;
  lr_fleet_view_get(b, &v);
  CHECK_NEAR(v.tokens, 5.0, 1e-9);
  /* b's own success counts before it is sent: 5.1 > 5 */
  lr_fleet_record(b, LR_FLEET_SUCCESS);
  CHECK_EQ_INT(lr_fleet_budget_allows_retry(b), 1);
  CHECK_EQ_INT(lr_fleet_sync_now(b), LR_FLEET_OK);
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  lr_fleet_view_get(a, &v);
  CHECK_NEAR(v.tokens, 5.1, 1e-9);
  CHECK_EQ_INT(lr_fleet_budget_allows_retry(a), 1);
  lr_fleet_free(a);
  lr_fleet_free(b);
}

/* The client-side throttle on the fleet's counts: b's refusal is raised by
 * a's requests, lowered by a's accepts, and the window (1 s, ten buckets
 * of 100 ms on Redis's clock) forgets them. */
static void test_throttle_shared(void) {
  lr_fleet_settings s = test_settings();
  s.throttle = 1, s.throttle_k = 2, s.throttle_window = 1;
  lr_fleet *a = handle(URL, "throttle", "host-a:1", s, NULL);
  lr_fleet *b = handle(URL, "throttle", "host-b:2", s, NULL);
  reset(a);
  CHECK_EQ_DBL(lr_fleet_throttle_request(a), LR_FLEET_LOCAL); /* no sync yet */
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);            /* 1 request */
  CHECK_EQ_INT(lr_fleet_sync_now(b), LR_FLEET_OK);
  CHECK_NEAR(lr_fleet_throttle_refusal(b), 1.0 / 2, 1e-9);
  for (int i = 0; i < 8; i++) lr_fleet_throttle_request(a); /* 9 requests, no accept */
  CHECK_NEAR(lr_fleet_throttle_refusal(a), 9.0 / 10, 1e-9); /* unsent: a's own view */
  CHECK_NEAR(lr_fleet_throttle_refusal(b), 1.0 / 2, 1e-9);  /* b has not seen them */
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  CHECK_EQ_INT(lr_fleet_sync_now(b), LR_FLEET_OK);
  CHECK_NEAR(lr_fleet_throttle_refusal(b), 9.0 / 10, 1e-9);
  lr_fleet_view v;
  lr_fleet_view_get(b, &v);
  CHECK_EQ_DBL(v.requests, 9);
  /* two successes of a's, each its request's accept: 9 - 2 * 2 = 5 over
   * 10 (a success alone is the budget's and breaker's) */
  lr_fleet_record(a, LR_FLEET_SUCCESS), lr_fleet_throttle_accept(a);
  lr_fleet_record(a, LR_FLEET_SUCCESS), lr_fleet_throttle_accept(a);
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  CHECK_EQ_INT(lr_fleet_sync_now(b), LR_FLEET_OK);
  CHECK_NEAR(lr_fleet_throttle_refusal(b), 5.0 / 10, 1e-9);
  /* another K on the same key is refused: its own counts decide */
  lr_fleet_settings k3 = s;
  k3.throttle_k = 3;
  lr_fleet *c = handle(URL, "throttle", "host-c:3", k3, NULL);
  CHECK_EQ_INT(lr_fleet_sync_now(c), LR_FLEET_E_REFUSED);
  lr_fleet_throttle_request(c);
  CHECK_EQ_DBL(lr_fleet_throttle_refusal(c), LR_FLEET_LOCAL);
  lr_fleet_free(c);
  /* past the window: forgotten */
  redis_sleep_ms(1200);
  CHECK_EQ_INT(lr_fleet_sync_now(b), LR_FLEET_OK);
  CHECK_EQ_DBL(lr_fleet_throttle_refusal(b), 0);
  lr_fleet_free(a);
  lr_fleet_free(b);
}

/* A request a later guard refused is uncounted: out of the batch not
 * sent yet, or (its batch gone) out of the next one. */
static void test_throttle_unrequest(void) {
  lr_fleet_settings s = test_settings();
  s.throttle = 1, s.throttle_k = 2, s.throttle_window = 60;
  lr_fleet *a = handle(URL, "unrequest", "host-a:1", s, NULL);
  lr_fleet *b = handle(URL, "unrequest", "host-b:2", s, NULL);
  reset(a);
  for (int i = 0; i < 3; i++) lr_fleet_throttle_request(a);
  lr_fleet_throttle_unrequest(a);
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  CHECK_EQ_INT(lr_fleet_sync_now(b), LR_FLEET_OK);
  lr_fleet_view v;
  lr_fleet_view_get(b, &v);
  CHECK_EQ_DBL(v.requests, 2);
  lr_fleet_throttle_unrequest(a); /* its batch went */
  lr_fleet_view_get(a, &v);
  CHECK_EQ_DBL(v.requests, 1);
  lr_fleet_throttle_request(a), lr_fleet_throttle_request(a);
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  CHECK_EQ_INT(lr_fleet_sync_now(b), LR_FLEET_OK);
  lr_fleet_view_get(b, &v);
  CHECK_EQ_DBL(v.requests, 3);
  lr_fleet_free(a);
  lr_fleet_free(b);
}

/* A throttling answer costs throttle_cost tokens and is neutral to the
 * breaker, as locally: it does not end a run of failures (the four around
 * it open the breaker of 3); a spend (the fleet's op, which the engine no
 * longer calls for a hedge) takes a whole token and is no failure. */
static void test_throttled_and_spent(void) {
  lr_fleet_settings s = test_settings();
  s.throttle_cost = 0.5;
  lr_fleet *a = handle(URL, "throttled", "host-a:1", s, NULL);
  reset(a);
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK); /* 10 tokens */
  lr_fleet_record(a, LR_FLEET_FAILURE);
  lr_fleet_record(a, LR_FLEET_FAILURE);
  lr_fleet_record(a, LR_FLEET_THROTTLED);
  lr_fleet_record(a, LR_FLEET_FAILURE);
  lr_fleet_record(a, LR_FLEET_FAILURE);
  lr_fleet_spend(a);
  CHECK_NEAR(lr_fleet_tokens(a), 10 - 4 - 0.5 - 1, 1e-9); /* unsent, counted */
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  lr_fleet_view v;
  lr_fleet_view_get(a, &v);
  CHECK_NEAR(v.tokens, 4.5, 1e-9);
  CHECK_EQ_INT(v.breaker, 1);
  CHECK_EQ_INT(v.consecutive_failures, 4);
  lr_fleet_free(a);
}

/* One batch of several outcomes: the run of failures is the one after the
 * last success or answer, tokens move by the net sum. */
static void test_batched_outcomes(void) {
  lr_fleet *a = handle(URL, "batch", "host-a:1", test_settings(), NULL);
  reset(a);
  lr_fleet_outcome seq[4] = { LR_FLEET_FAILURE, LR_FLEET_FAILURE, LR_FLEET_SUCCESS,
                              LR_FLEET_FAILURE };
  for (int i = 0; i < 4; i++) lr_fleet_record(a, seq[i]);
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  lr_fleet_view v;
  lr_fleet_view_get(a, &v);
  CHECK_EQ_INT(v.consecutive_failures, 1);
  CHECK_NEAR(v.tokens, 7.1, 1e-9);
  CHECK_EQ_INT(v.breaker, 0);
  fail_and_sync(a, 1);
  lr_fleet_record(a, LR_FLEET_ANSWERED); /* a final answer: no token, ends the run */
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  lr_fleet_view_get(a, &v);
  CHECK_EQ_INT(v.consecutive_failures, 0);
  CHECK_NEAR(v.tokens, 6.1, 1e-9);
  /* tokens never exceed max_tokens nor fall below 0 */
  for (int i = 0; i < 200; i++) lr_fleet_record(a, LR_FLEET_SUCCESS);
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  lr_fleet_view_get(a, &v);
  CHECK_NEAR(v.tokens, 10, 1e-9);
  for (int i = 0; i < 30; i++) lr_fleet_record(a, LR_FLEET_FAILURE);
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  lr_fleet_view_get(a, &v);
  CHECK_NEAR(v.tokens, 0, 1e-9);
  CHECK_EQ_INT(v.breaker, 1);
  lr_fleet_free(a);
}

/* b learns of a breaker opened by a through maybe_sync alone. */
static void test_breaker_seen_within_sync(void) {
  lr_fleet_settings s = test_settings();
  lr_fleet *a = handle(URL, "breaker", "host-a:1", s, NULL);
  lr_fleet *b = handle(URL, "breaker", "host-b:2", s, NULL);
  reset(a);
  CHECK_EQ_INT(lr_fleet_sync_now(b), LR_FLEET_OK);
  CHECK_EQ_INT(lr_fleet_breaker_admits(b, 1), 1);
  fail_and_sync(a, 2);
  CHECK_EQ_INT(lr_fleet_breaker_admits(a, 1), 1); /* 2 of 3 */
  fail_and_sync(a, 1);
  CHECK_EQ_INT(lr_fleet_breaker_admits(a, 1), 0); /* open */
  CHECK_EQ_INT(lr_fleet_breaker_admits(a, 0), 0);
  double t0 = now_s(), learned = -1;
  for (int i = 0; i < 400 && now_s() - t0 < 2; i++) {
    lr_fleet_maybe_sync(b);
    if (lr_fleet_breaker_admits(b, 1) == 0) {
      learned = now_s() - t0;
      break;
    }
    redis_sleep_ms(1);
  }
  CHECK(learned >= 0);
  CHECK(learned <= s.sync_ms / 1000.0 + 0.1);
  lr_fleet_view v;
  lr_fleet_view_get(b, &v);
  CHECK_EQ_INT(v.breaker, 1);
  CHECK_EQ_INT(v.consecutive_failures, 3);
  CHECK(v.opened_at_ms > 0);
  /* a success elsewhere does not close an open breaker */
  lr_fleet_record(b, LR_FLEET_SUCCESS);
  CHECK_EQ_INT(lr_fleet_sync_now(b), LR_FLEET_OK);
  CHECK_EQ_INT(lr_fleet_breaker_admits(b, 1), 0);
  lr_fleet_free(a);
  lr_fleet_free(b);
}

/* A first attempt while half-open: the first ask is refused and kicks the
 * worker for a permit (nothing waits); the answer, as the next call sees
 * it once the worker's round trip is back (bounded). */
static int admits_after_ask(lr_fleet *f) {
  lr_fleet_view v;
  lr_fleet_view_get(f, &v);
  long long syncs = v.syncs, failures = v.sync_failures;
  int first = lr_fleet_breaker_admits(f, 1);
  if (first != 0) return first;
  double t0 = now_s();
  for (int i = 0; i < 400 && now_s() - t0 < 2; i++) {
    lr_fleet_view_get(f, &v);
    if (v.syncs != syncs || v.sync_failures != failures) break;
    redis_sleep_ms(5);
  }
  CHECK(v.syncs != syncs); /* the worker asked */
  return lr_fleet_breaker_admits(f, 1);
}

static void test_half_open_probes(void) {
  lr_fleet_settings s = test_settings();
  s.failures = 1;
  s.open_seconds = 0.3;
  lr_fleet *a = handle(URL, "probes", "host-a:1", s, NULL);
  lr_fleet *b = handle(URL, "probes", "host-b:2", s, NULL);
  reset(a);
  fail_and_sync(a, 1);
  CHECK_EQ_INT(lr_fleet_sync_now(b), LR_FLEET_OK);
  CHECK_EQ_INT(lr_fleet_breaker_admits(b, 1), 0);
  redis_sleep_ms(350);
  CHECK_EQ_INT(admits_after_ask(a), LR_FLEET_PERMIT); /* the fleet's one permit */
  lr_fleet_permit_give_back(a);                       /* its attempt refused by a later guard: */
  CHECK_EQ_INT(lr_fleet_breaker_admits(a, 1), LR_FLEET_PERMIT); /* back, no round trip */
  CHECK_EQ_INT(admits_after_ask(b), 0);                         /* none left */
  lr_fleet_view v;
  lr_fleet_view_get(b, &v);
  long long syncs = v.syncs;
  CHECK_EQ_INT(v.breaker, 2);
  CHECK_EQ_INT(lr_fleet_breaker_admits(b, 1), 0); /* asked just now: no I/O */
  lr_fleet_view_get(b, &v);
  CHECK_EQ_INT(v.syncs, syncs);
  CHECK_EQ_INT(lr_fleet_breaker_admits(b, 0), 1); /* retries go on */
  lr_fleet_record(a, LR_FLEET_THROTTLED);         /* a 429 closes nothing */
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  lr_fleet_view_get(a, &v);
  CHECK_EQ_INT(v.breaker, 2);
  lr_fleet_record(a, LR_FLEET_SUCCESS); /* the probe worked */
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  CHECK_EQ_INT(lr_fleet_sync_now(b), LR_FLEET_OK);
  CHECK_EQ_INT(lr_fleet_breaker_admits(b, 1), 1); /* closed */
  /* a probe that never reports: its permit is renewed after open_seconds */
  fail_and_sync(a, 1);
  redis_sleep_ms(350);
  CHECK_EQ_INT(admits_after_ask(a), LR_FLEET_PERMIT);
  redis_sleep_ms(100);
  CHECK_EQ_INT(lr_fleet_sync_now(b), LR_FLEET_OK); /* as a call's maybe_sync would */
  CHECK_EQ_INT(lr_fleet_breaker_admits(b, 1), 0);
  redis_sleep_ms(300);
  CHECK_EQ_INT(admits_after_ask(b), LR_FLEET_PERMIT);
  /* a probe's failure opens it again */
  fail_and_sync(b, 1);
  CHECK_EQ_INT(lr_fleet_breaker_admits(b, 1), 0);
  lr_fleet_view_get(b, &v);
  CHECK_EQ_INT(v.breaker, 1);
  lr_fleet_free(a);
  lr_fleet_free(b);
}

/* The fleet's probe permits left, as Redis holds them. */
static long long probes_left(lr_fleet *f) {
  lr_fleet_status st = status_of(f);
  long long n = st.probes_left;
  lr_fleet_status_free(&st);
  return n;
}

/* Probe permits handed back (a later guard refused the attempt, or a
 * throttling answer came) are the process's again, never more than
 * `probes`; those it holds when its handle closes go back to the fleet,
 * in their own half-open period only and never beyond `probes` there,
 * for another process's probe. */
static void test_permits_handed_back(void) {
  lr_fleet_settings s = test_settings();
  s.failures = 1;
  s.open_seconds = 0.3;
  s.probes = 2;
  lr_fleet *a = handle(URL, "handback", "host-a:1", s, NULL);
  lr_fleet *b = handle(URL, "handback", "host-b:2", s, NULL);
  lr_fleet *c = handle(URL, "handback", "host-c:3", s, NULL);
  reset(a);
  fail_and_sync(a, 1);
  redis_sleep_ms(350);
  CHECK_EQ_INT(admits_after_ask(a), LR_FLEET_PERMIT); /* one of the fleet's two */
  for (int i = 0; i < 3; i++) lr_fleet_permit_give_back(a);
  CHECK_EQ_INT(atomic_load(&a->permits), 2); /* never more than probes */
  CHECK_EQ_INT(probes_left(b), 1);
  CHECK_EQ_INT(lr_fleet_flush(a), LR_FLEET_OK); /* its handle closes: both back */
  CHECK_EQ_INT(atomic_load(&a->permits), 0);
  CHECK_EQ_INT(probes_left(b), 2); /* 1 + 2, never beyond probes */
  /* b holds one when the breaker opens again and goes half-open anew:
   * its permit, of the period before, is not the new period's */
  CHECK_EQ_INT(lr_fleet_sync_now(b), LR_FLEET_OK);
  CHECK_EQ_INT(admits_after_ask(b), LR_FLEET_PERMIT);
  lr_fleet_permit_give_back(b);
  CHECK_EQ_INT(atomic_load(&b->permits), 1);
  CHECK_EQ_INT(lr_fleet_sync_now(c), LR_FLEET_OK);
  fail_and_sync(c, 1); /* a probe's failure: open again */
  redis_sleep_ms(350);
  CHECK_EQ_INT(admits_after_ask(c), LR_FLEET_PERMIT); /* the new period's */
  CHECK_EQ_INT(probes_left(c), 1);
  CHECK_EQ_INT(lr_fleet_flush(b), LR_FLEET_OK);
  CHECK_EQ_INT(probes_left(c), 1);
  lr_fleet_free(a);
  lr_fleet_free(b);
  lr_fleet_free(c);
}

static redis_srv SRV;

static long long cached_scripts(void) {
  redisReply *r = redis_cmd(&SRV, "INFO memory");
  long long n = -1;
  const char *at = r && r->str ? strstr(r->str, "number_of_cached_scripts:") : NULL;
  if (at) n = atoll(at + strlen("number_of_cached_scripts:"));
  if (r) freeReplyObject(r);
  return n;
}

static void flush_scripts(void) {
  redisReply *r = redis_cmd(&SRV, "SCRIPT FLUSH");
  CHECK(r && r->type == REDIS_REPLY_STATUS);
  if (r) freeReplyObject(r);
  CHECK_EQ_INT(cached_scripts(), 0);
}

static void test_script_flush(void) {
  lr_fleet *a = handle(URL, "flush", "host-a:1", test_settings(), NULL);
  reset(a);
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  flush_scripts();
  fail_and_sync(a, 1);               /* EVALSHA: NOSCRIPT, then EVAL */
  CHECK_EQ_INT(cached_scripts(), 1); /* EVAL put it back */
  lr_fleet_status st = status_of(a);
  CHECK_NEAR(st.tokens, 9, 1e-9);
  lr_fleet_status_free(&st);
  /* maybe_sync's path: the batch comes back and goes again by EVAL */
  flush_scripts();
  lr_fleet_record(a, LR_FLEET_FAILURE);
  lr_fleet_view v;
  lr_fleet_view_get(a, &v);
  long long before = v.syncs;
  double t0 = now_s(); /* ends at the sync: 10 s is a busy machine's margin */
  for (int i = 0; i < 5000 && v.syncs < before + 1 && now_s() - t0 < 10; i++) {
    lr_fleet_maybe_sync(a);
    redis_sleep_ms(2);
    lr_fleet_view_get(a, &v);
  }
  CHECK_EQ_INT(v.syncs, before + 1);
  CHECK_EQ_INT(v.health, LR_FLEET_HEALTHY);
  st = status_of(a);
  CHECK_NEAR(st.tokens, 8, 1e-9); /* the failure was not lost */
  lr_fleet_status_free(&st);
  lr_fleet_free(a);
}

/* The calls of one command so far (INFO commandstats), or -1. */
static long long command_calls(const char *name) {
  redisReply *r = redis_cmd(&SRV, "INFO commandstats");
  char field[64];
  snprintf(field, sizeof field, "cmdstat_%s:calls=", name);
  const char *at = r && r->str ? strstr(r->str, field) : NULL;
  long long n = at ? atoll(at + strlen(field)) : r ? 0 : -1;
  if (r) freeReplyObject(r);
  return n;
}

/* Every script goes by EVALSHA from its first call, its SHA1 computed
 * by the process (the same as Redis's own for it); no SCRIPT LOAD at
 * connect; on NOSCRIPT (a server that never ran it, or a SCRIPT FLUSH)
 * once more by EVAL, which puts it in the cache.  The budget's reserve
 * here; the sync's script: test_script_flush, test_first_sync. */
static void test_reserve_script(void) {
  lr_fleet_settings s = test_settings();
  s.reserve = 2;
  lr_fleet *a = handle(URL, "reserve", "host-a:1", s, NULL);
  reset(a);
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  flush_scripts();
  long long load = command_calls("script|load");
  long long eval = command_calls("eval"), evalsha = command_calls("evalsha");
  CHECK_EQ_INT(lr_fleet_reserve_take(a, 0, NULL), 1); /* EVALSHA: NOSCRIPT; EVAL */
  CHECK_EQ_INT(command_calls("evalsha"), evalsha + 1);
  CHECK_EQ_INT(command_calls("eval"), eval + 1);
  for (int i = 0; i < 3; i++) CHECK_EQ_INT(lr_fleet_reserve_take(a, 0, NULL), 1);
  CHECK_EQ_INT(command_calls("eval"), eval + 1);
  CHECK_EQ_INT(command_calls("evalsha"), evalsha + 4);
  flush_scripts();
  CHECK_EQ_INT(lr_fleet_reserve_take(a, 0, NULL), 1); /* NOSCRIPT: once more, by EVAL */
  CHECK_EQ_INT(command_calls("eval"), eval + 2);
  CHECK_EQ_INT(lr_fleet_reserve_take(a, 0, NULL), 1);
  CHECK_EQ_INT(command_calls("evalsha"), evalsha + 6);
  CHECK_EQ_INT(command_calls("script|load"), load);
  lr_fleet_view v;
  lr_fleet_view_get(a, &v);
  CHECK_EQ_INT(v.health, LR_FLEET_HEALTHY);
  lr_fleet_free(a);
}

/* The reserve's question rides on the sync before a retry (issue 33): a
 * retry the fleet's tokens refused before its wait (the budget spent)
 * has its pre-retry round trip (the remote ops' refresh, a blocking
 * call's) take a retry of the fleet's reserve for it: one script call,
 * no reserve script.  The fallback, when that round trip does not answer,
 * asks reserve.c's script once: the view was recent (no round trip made),
 * or Redis saw the fleet's tokens allow a retry that this process's view
 * then refuses (a failure counted after the batch left).  The reserve
 * taken either way is the one field rtat, so the floor stays the fleet's
 * (2 a second here: 50 s of them held, 100 at most). */
static long long round_trips(lr_fleet *f) { return (long long)lr_fleet_round_trips(f); }

static void test_reserve_folded(void) {
  const lr_remote_ops *ops = &lr_fleet_remote_ops;
  lr_waiter w;
  lr_waiter_init(&w);
  atomic_store(&w.blocking, 1);
  lr_fleet_settings s = test_settings();
  s.reserve = 2;
  s.sync_ms = 10000; /* a view synced just now stays recent, however busy the machine */
  lr_fleet *a = handle(URL, "folded", "host-a:1", s, NULL);
  /* no block of the budget's tokens (test_fleet_lease.c has them): the
   * worker's timer that would give one back makes no round trip here */
  a->lease_closing = 1;
  reset(a);
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  fail_and_sync(a, 6); /* 4 of 10 tokens: a retry refused */
  CHECK_EQ_INT(lr_fleet_budget_allows_retry(a), 0);
  redisReply *r = redis_cmd(&SRV, "HEXISTS luaretry:{folded} rtat");
  if (CHECK(r != NULL)) CHECK_EQ_INT(r->integer, 0);
  if (r) freeReplyObject(r);

  /* folded: a failure unsent, the view not recent; one round trip, the
   * sync's script, takes the reserve's retry */
  lr_fleet_record(a, LR_FLEET_FAILURE);
  long long trips = round_trips(a), evalsha = command_calls("evalsha");
  long long eval = command_calls("eval");
  CHECK_EQ_INT(ops->refresh(a, 0, 0, &w, 1), 1);
  CHECK_EQ_INT(round_trips(a), trips + 1);
  CHECK_EQ_INT(command_calls("evalsha") + command_calls("eval"), evalsha + eval + 1);
  r = redis_cmd(&SRV, "HEXISTS luaretry:{folded} rtat");
  if (CHECK(r != NULL)) CHECK_EQ_INT(r->integer, 1);
  if (r) freeReplyObject(r);
  /* without the question the same round trip answers nothing */
  lr_fleet_record(a, LR_FLEET_FAILURE);
  trips = round_trips(a);
  CHECK_EQ_INT(ops->refresh(a, 0, 0, &w, 0), LR_REMOTE_LOCAL);
  CHECK_EQ_INT(round_trips(a), trips + 1);

  /* the view recent (nothing unsent, synced just now): without the
   * question no round trip; with it the sync's, which answers it (the one
   * round trip reserve.c's script would make, whenever the last sync was) */
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  trips = round_trips(a);
  CHECK_EQ_INT(ops->refresh(a, 0, 0, &w, 0), LR_REMOTE_LOCAL);
  CHECK_EQ_INT(round_trips(a), trips);
  CHECK_EQ_INT(ops->refresh(a, 0, 0, &w, 1), 1);
  CHECK_EQ_INT(round_trips(a), trips + 1);
  CHECK_EQ_INT(ops->reserve_take(a, 0, 0, &w), 1); /* reserve.c's own: one round trip */
  CHECK_EQ_INT(round_trips(a), trips + 2);

  /* tokens seen differently: Redis sees 6 of 10 (a retry allowed: the
   * reserve untouched), this process then counts 2 failures (4: refused) */
  reset(a);
  double since = now_s();
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  fail_and_sync(a, 3);
  lr_fleet_record(a, LR_FLEET_FAILURE); /* 6 once sent */
  trips = round_trips(a);
  CHECK_EQ_INT(ops->refresh(a, 0, 0, &w, 1), LR_REMOTE_LOCAL);
  CHECK_EQ_INT(round_trips(a), trips + 1);
  r = redis_cmd(&SRV, "HEXISTS luaretry:{folded} rtat");
  if (CHECK(r != NULL)) CHECK_EQ_INT(r->integer, 0);
  if (r) freeReplyObject(r);
  lr_fleet_record(a, LR_FLEET_FAILURE), lr_fleet_record(a, LR_FLEET_FAILURE);
  CHECK_EQ_INT(lr_fleet_budget_allows_retry(a), 0);
  CHECK_EQ_INT(ops->reserve_take(a, 0, 0, &w), 1);
  CHECK_EQ_INT(round_trips(a), trips + 2);

  /* the floor is the fleet's: folded or not, the retries held (50 s of
   * 2 a second: 100) and what refilled since the reset, from one field;
   * then the sync says it is spent (each asks: a failure unsent, the
   * fleet's tokens refusing) */
  int taken = 2, v = 1; /* the two above, since the reset */
  for (int i = 0; i < 300 && v == 1; i++) {
    lr_fleet_record(a, LR_FLEET_FAILURE);
    v = ops->refresh(a, 0, 0, &w, 1);
    if (v == 1) taken++;
  }
  double secs = now_s() - since;
  CHECK_EQ_INT(v, 0); /* spent: said by the sync */
  if (!CHECK(taken >= 100 && taken <= 100 + 2 * secs + 1))
    fprintf(stderr, "  %d retries of the reserve in %.3f s\n", taken, secs);
  lr_waiter_close(&w);
  lr_fleet_free(a);
}

/* A new process's first sync: its connect sends AUTH and SELECT only, the
 * script goes by EVALSHA at once (the SHA1 computed here is Redis's), so
 * a process whose script Redis holds makes one round trip, counted. */
static void test_first_sync(void) {
  char sha[41];
  CHECK_EQ_INT(lr_script_sha(LR_FLEET_SCRIPT, sha), 1);
  redisReply *r = redis_cmd(&SRV, "SCRIPT LOAD %s", LR_FLEET_SCRIPT);
  if (CHECK(r && r->type == REDIS_REPLY_STRING)) CHECK_EQ_STR(r->str, sha);
  if (r) freeReplyObject(r);
  long long load = command_calls("script|load");
  long long eval = command_calls("eval"), evalsha = command_calls("evalsha");
  lr_fleet *a = handle(URL, "first", "host-a:1", test_settings(), NULL);
  lr_fleet_record(a, LR_FLEET_FAILURE);
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  CHECK_EQ_INT(command_calls("evalsha"), evalsha + 1);
  CHECK_EQ_INT(command_calls("eval"), eval);
  CHECK_EQ_INT(command_calls("script|load"), load);
  CHECK_EQ_INT((long long)lr_fleet_round_trips(a), 1);
  lr_fleet_free(a);
}

static void test_status_and_reset(void) {
  lr_fleet *a = handle(URL, "status", "host-a:1", test_settings(), NULL);
  lr_fleet *b = handle(UNIX_URL, "status", "host-b:2", test_settings(), NULL);
  reset(a);
  lr_fleet_status st = status_of(a);
  CHECK_EQ_INT(st.exists, 0);
  CHECK_EQ_INT(st.count, 0);
  lr_fleet_status_free(&st);
  fail_and_sync(a, 2);
  CHECK_EQ_INT(lr_fleet_sync_now(b), LR_FLEET_OK); /* over the Unix socket */
  st = status_of(b);
  CHECK_EQ_INT(st.exists, 1);
  CHECK_NEAR(st.tokens, 8, 1e-9);
  CHECK_NEAR(st.max_tokens, 10, 1e-9);
  CHECK_EQ_INT(st.consecutive_failures, 2);
  CHECK_EQ_INT(st.breaker, 0);
  CHECK(st.now_ms >= st.updated_at_ms && st.updated_at_ms > 0);
  if (CHECK_EQ_INT(st.count, 2)) {
    CHECK_EQ_STR(st.processes[0].member, "host-b:2"); /* most recent first */
    CHECK_EQ_STR(st.processes[1].member, "host-a:1");
    CHECK(st.processes[1].seen_ago >= 0 && st.processes[1].seen_ago < 5);
  }
  lr_fleet_status_free(&st);
  redisReply *r = redis_cmd(&SRV, "PTTL luaretry:{status}");
  CHECK(r && r->type == REDIS_REPLY_INTEGER && r->integer > 3000000); /* ~1 hour */
  if (r) freeReplyObject(r);
  reset(b);
  st = status_of(a);
  CHECK_EQ_INT(st.exists, 0);
  CHECK_EQ_INT(st.count, 0);
  lr_fleet_status_free(&st);
  lr_fleet_free(a);
  lr_fleet_free(b);
}

/* SELECT: the state lands in the URL's database only. */
static void test_database(void) {
  char url[220];
  snprintf(url, sizeof url, "%s?db=3", UNIX_URL);
  lr_fleet *a = handle(url, "db3", "host-a:1", test_settings(), NULL);
  CHECK_EQ_INT(lr_fleet_sync_now(a), LR_FLEET_OK);
  redisReply *r = redis_cmd(&SRV, "EXISTS luaretry:{db3}");
  CHECK(r && r->type == REDIS_REPLY_INTEGER && r->integer == 0);
  if (r) freeReplyObject(r);
  r = redis_cmd(&SRV, "EVAL %s 1 luaretry:{db3}",
                "redis.call('SELECT', 3) return redis.call('EXISTS', KEYS[1])");
  CHECK(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
  if (r) freeReplyObject(r);
  reset(a);
  lr_fleet_free(a);
}

/* ---- threads: no delta lost or counted twice */

#define THREADS 4
#define ROUNDS  50

static void *hammer(void *arg) {
  lr_fleet *f = arg;
  for (int i = 0; i < ROUNDS; i++) {
    lr_fleet_record(f, LR_FLEET_FAILURE);
    lr_fleet_record(f, LR_FLEET_SUCCESS); /* ratio 0: earns nothing */
    if (i % 5 == 0)
      lr_fleet_sync_now(f);
    else
      lr_fleet_maybe_sync(f);
    lr_fleet_budget_allows_retry(f);
    lr_fleet_breaker_admits(f, 1);
  }
  return NULL;
}

static void test_threads(void) {
  lr_fleet_settings s = test_settings();
  s.max_tokens = 1000;
  s.token_ratio = 0;
  s.sync_ms = 1;
  lr_fleet *f = handle(URL, "threads", "host-a:1", s, NULL);
  reset(f);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, hammer, f);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  CHECK_EQ_INT(lr_fleet_sync_now(f), LR_FLEET_OK);
  lr_fleet_status st = status_of(f);
  CHECK_NEAR(st.tokens, 1000 - THREADS * ROUNDS, 1e-9);
  lr_fleet_status_free(&st);
  lr_fleet_view v;
  lr_fleet_view_get(f, &v);
  CHECK_EQ_INT(v.sync_failures, 0);
  lr_fleet_free(f);
}

/* ---- failures: bounded, reported once, no credential, recovered */

static int listener(int backlog, int *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, backlog) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

/* Everything said about f: the log and the view hold no secret. */
static void no_secret(lr_fleet *f, logbook *log, const char *secret) {
  lr_fleet_view v;
  lr_fleet_view_get(f, &v);
  CHECK(strstr(v.detail, secret) == NULL);
  CHECK(strstr(v.where, secret) == NULL);
  for (int i = 0; i < log->n && i < 4; i++) CHECK(strstr(log->line[i], secret) == NULL);
}

/* One failed sync: its code, within the bound; then E_BACKOFF at once:
 * well within the 250 ms a round trip's command timeout would take (the
 * bounds leave a busy machine room: a spec never races one limit against
 * another). */
static void fails_once(lr_fleet *f, lr_fleet_code want, double bound_s, logbook *log) {
  double t0 = now_s();
  CHECK_EQ_INT(lr_fleet_sync_now(f), want);
  double took = now_s() - t0;
  if (!CHECK(took <= bound_s)) fprintf(stderr, "  took %.3f s, bound %.3f s\n", took, bound_s);
  t0 = now_s();
  CHECK_EQ_INT(lr_fleet_sync_now(f), LR_FLEET_E_BACKOFF);
  CHECK(now_s() - t0 < 0.2);
  CHECK_EQ_INT(log->n, 1);
  CHECK_EQ_INT(lr_fleet_budget_allows_retry(f), LR_FLEET_LOCAL);
  CHECK_EQ_INT(lr_fleet_breaker_admits(f, 1), LR_FLEET_LOCAL);
  lr_fleet_view v;
  lr_fleet_view_get(f, &v);
  CHECK_EQ_INT(v.health, LR_FLEET_DEGRADED);
  CHECK(v.detail[0] != '\0');
}

/* Calls for `seconds`, and 5 calls at least (bounded): the log stays at
 * one line and connect attempts follow the backoff, not the calls.  A
 * count, not only a time: each connect attempt may take its full deadline,
 * and a busy machine's may take longer than `seconds` alone. */
static void degraded_for(lr_fleet *f, double seconds, logbook *log) {
  int calls = 0, attempts = 0;
  double t0 = now_s();
  for (int i = 0; i < 100000 && (calls < 5 || now_s() - t0 < seconds); i++, calls++) {
    lr_fleet_record(f, LR_FLEET_FAILURE);
    lr_fleet_maybe_sync(f);
    if (lr_fleet_sync_now(f) != LR_FLEET_E_BACKOFF) attempts++;
    redis_sleep_ms(1);
  }
  double took = now_s() - t0;
  CHECK(attempts <= 2 + (int)(took / 0.025)); /* backoff >= 25 ms (50 ms, jittered) */
  CHECK_EQ_INT(log->n, 1);
}

/* Back within `seconds`: one more log line, "back". */
static void recovers(lr_fleet *f, double seconds, logbook *log) {
  double t0 = now_s();
  lr_fleet_code rc = LR_FLEET_E_BACKOFF;
  for (int i = 0; i < 10000 && rc != LR_FLEET_OK && now_s() - t0 < seconds; i++) {
    rc = lr_fleet_sync_now(f);
    if (rc != LR_FLEET_OK) redis_sleep_ms(5);
  }
  CHECK_EQ_INT(rc, LR_FLEET_OK);
  CHECK_EQ_INT(log->n, 2);
  CHECK_CONTAINS(log->line[1], "back");
  CHECK_EQ_INT(lr_fleet_breaker_admits(f, 1), 1);
}

static void test_never_answers(void) {
  int port = 0, fd = listener(16, &port);
  if (!CHECK(fd >= 0)) return;
  char url[100];
  snprintf(url, sizeof url, "redis://:pw-never@127.0.0.1:%d/0", port);
  logbook log;
  logbook_init(&log);
  lr_fleet_settings s = test_settings();
  lr_fleet *f = handle(url, "silent", "host-a:1", s, &log);
  /* connected at once (the kernel accepts), AUTH never answered */
  fails_once(f, LR_FLEET_E_TIMEOUT, (s.connect_timeout_ms + s.command_timeout_ms) / 1000.0 + 1,
             &log);
  CHECK_CONTAINS(log.line[0], "no reply in time");
  CHECK_CONTAINS(log.line[0], "local guards");
  no_secret(f, &log, "pw-never");
  degraded_for(f, 0.3, &log);
  lr_fleet_free(f);
  close(fd);
}

/* A listen backlog that is full: the SYN goes unanswered, connect waits
 * until connect_timeout_ms (or, if the kernel completes it, AUTH waits). */
static void test_connect_timeout(void) {
  int port = 0, fd = listener(0, &port);
  if (!CHECK(fd >= 0)) return;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fillers[4];
  for (int i = 0; i < 4; i++) {
    fillers[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    connect(fillers[i], (struct sockaddr *)&a, sizeof a);
  }
  char url[100];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
  logbook log;
  logbook_init(&log);
  lr_fleet_settings s = test_settings();
  lr_fleet *f = handle(url, "backlog", "host-a:1", s, &log);
  fails_once(f, LR_FLEET_E_TIMEOUT, (s.connect_timeout_ms + s.command_timeout_ms) / 1000.0 + 1,
             &log);
  lr_fleet_free(f);
  for (int i = 0; i < 4; i++) close(fillers[i]);
  close(fd);
}

static void test_stopped_server(void) {
  logbook log;
  logbook_init(&log);
  lr_fleet_settings s = test_settings();
  lr_fleet *f = handle(URL, "stopped", "host-a:1", s, &log);
  CHECK_EQ_INT(lr_fleet_sync_now(f), LR_FLEET_OK);
  redis_signal(&SRV, SIGSTOP);
  lr_fleet_record(f, LR_FLEET_FAILURE);
  fails_once(f, LR_FLEET_E_TIMEOUT, s.command_timeout_ms / 1000.0 + 1, &log);
  degraded_for(f, 0.3, &log); /* reconnects: connect works, AUTH or the sync times out */
  redis_signal(&SRV, SIGCONT);
  recovers(f, 3, &log);
  lr_fleet_free(f);
}

/* A flush (a policy's free, a reload) that cuts the worker's round trip
 * short before the patience (eight usual round trips, which a loaded
 * machine makes long) cannot tell a stalled Redis from a busy one: its own
 * round trip for the last counts waits one patience, never a whole command
 * timeout, and says nothing of local guards (no call is left).  It did
 * wait the command timeout: test_fleet_nowait under ThreadSanitizer, in a
 * loaded `make test`. */
static void test_flush_after_early_cut(void) {
  logbook log;
  logbook_init(&log);
  lr_fleet_settings s = test_settings();
  s.command_timeout_ms = 5000;
  lr_fleet *f = handle(URL, "cut-early", "host-a:1", s, &log);
  CHECK_EQ_INT(lr_fleet_sync_now(f), LR_FLEET_OK);
  atomic_store(&f->rtt_us, 100000); /* usual round trips of 100 ms: a patience of 0.8 s */
  redis_signal(&SRV, SIGSTOP);
  lr_fleet_record(f, LR_FLEET_FAILURE); /* owed, so the worker's sync goes, and waits */
  lr_fleet_refresh_soon(f);
  /* the batch in flight counts in the view until its reply */
  for (int i = 0; i < 1000 && atomic_load(&f->inflight_net) == 0; i++) redis_sleep_ms(2);
  CHECK(atomic_load(&f->inflight_net) != 0);
  lr_fleet_record(f, LR_FLEET_FAILURE); /* owed again: the flush has a round trip to make */
  double t0 = now_s();
  lr_fleet_flush(f);
  double took = now_s() - t0;
  if (!CHECK(took < 2.5)) fprintf(stderr, "  the flush took %.3f s (command timeout 5 s)\n", took);
  CHECK_EQ_INT(atomic_load(&f->health), LR_FLEET_DEGRADED);
  if (!CHECK_EQ_INT(log.n, 0)) fprintf(stderr, "  said: %s\n", log.line[0]);
  lr_fleet_free(f);
  redis_signal(&SRV, SIGCONT);
}

static void test_killed_server(void) {
  redis_srv own;
  if (!CHECK(redis_start(&own, (const char *)NULL) == 0)) return;
  char url[100];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", own.port);
  logbook log;
  logbook_init(&log);
  lr_fleet_settings s = test_settings();
  lr_fleet *f = handle(url, "killed", "host-a:1", s, &log);
  CHECK_EQ_INT(lr_fleet_sync_now(f), LR_FLEET_OK);
  lr_fleet_maybe_sync(f);
  redis_halt(&own, 1); /* SIGKILL, mid-run */
  lr_fleet_record(f, LR_FLEET_FAILURE);
  fails_once(f, LR_FLEET_E_CONNECT, s.command_timeout_ms / 1000.0 + 1, &log);
  degraded_for(f, 0.5, &log);
  CHECK(redis_spawn_(&own) == 0); /* back, same port, empty */
  recovers(f, 3, &log);
  /* what was counted while Redis was away stayed with the local guards */
  lr_fleet_status st = status_of(f);
  CHECK_NEAR(st.tokens, 10, 1e-9);
  lr_fleet_status_free(&st);
  lr_fleet_free(f);
  redis_stop(&own);
}

static void test_passwords(void) {
  redis_srv own;
  if (!CHECK(redis_start(&own, "--requirepass", "right-pw-1", (const char *)NULL) == 0)) return;
  own.auth = "right-pw-1";
  redisReply *r = redis_cmd(&own, "ACL SETUSER alice on >alice-pw-1 ~* +@all");
  CHECK(r && r->type == REDIS_REPLY_STATUS);
  if (r) freeReplyObject(r);
  const char *urls[4] = { "redis://:wrong-pw-1@127.0.0.1:%d", "redis://127.0.0.1:%d",
                          "redis://alice:wrong-pw-2@127.0.0.1:%d",
                          "redis://alice-x:alice-pw-1@127.0.0.1:%d" };
  for (int i = 0; i < 4; i++) {
    char url[120];
    snprintf(url, sizeof url, urls[i], own.port);
    logbook log;
    logbook_init(&log);
    lr_fleet *f = handle(url, "auth", "host-a:1", test_settings(), &log);
    fails_once(f, LR_FLEET_E_AUTH, 1, &log);
    /* no password: the sync's EVALSHA, too long for Redis 7 before AUTH */
    CHECK(strstr(log.line[0], "WRONGPASS") || strstr(log.line[0], "NOAUTH") ||
          strstr(log.line[0],
                 "(the server needs a password) refused: ERR Protocol error: "
                 "unauthenticated"));
    no_secret(f, &log, "wrong-pw");
    no_secret(f, &log, "alice");
    lr_fleet_free(f);
  }
  const char *good[2] = { "redis://:right-pw-1@127.0.0.1:%d",
                          "redis://alice:alice-pw-1@127.0.0.1:%d" };
  for (int i = 0; i < 2; i++) {
    char url[120];
    snprintf(url, sizeof url, good[i], own.port);
    lr_fleet *f = handle(url, "auth", "host-a:1", test_settings(), NULL);
    CHECK_EQ_INT(lr_fleet_sync_now(f), LR_FLEET_OK);
    lr_fleet_free(f);
  }
  redis_stop(&own);
}

static void test_unreachable(void) {
  int port = 0, fd = listener(1, &port);
  if (fd >= 0) close(fd); /* a port nobody listens on */
  char url[120];
  snprintf(url, sizeof url, "redis://bob:hunter-22@127.0.0.1:%d/0", port);
  logbook log;
  logbook_init(&log);
  /* refused at once: within 1 s, where the connect timeout is 5 s */
  lr_fleet_settings s = test_settings();
  s.connect_timeout_ms = 5000;
  lr_fleet *f = handle(url, "nowhere", "host-a:1", s, &log);
  fails_once(f, LR_FLEET_E_CONNECT, 1, &log);
  CHECK_CONTAINS(log.line[0], "refused");
  CHECK_CONTAINS(log.line[0], "redis://***@127.0.0.1:");
  no_secret(f, &log, "hunter-22");
  no_secret(f, &log, "bob");
  char err[300] = "";
  lr_fleet_status st;
  CHECK_EQ_INT(lr_fleet_status_get(f, &st, err, sizeof err), LR_FLEET_E_CONNECT);
  CHECK_CONTAINS(err, "refused");
  CHECK(strstr(err, "hunter-22") == NULL);
  CHECK_EQ_INT(log.n, 1);
  lr_fleet_free(f);
  /* a missing Unix socket */
  logbook_init(&log);
  f = handle("unix:///nonexistent/luaretry.sock", "nowhere", "host-a:1", s, &log);
  fails_once(f, LR_FLEET_E_CONNECT, 1, &log);
  lr_fleet_free(f);
}

static void test_readonly_replica(void) {
  char port[16];
  snprintf(port, sizeof port, "%d", SRV.port);
  redis_srv rep;
  if (!CHECK(redis_start(&rep, "--replicaof", "127.0.0.1", port, (const char *)NULL) == 0)) return;
  char url[100];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", rep.port);
  logbook log;
  logbook_init(&log);
  lr_fleet *f = handle(url, "replica", "host-a:1", test_settings(), &log);
  fails_once(f, LR_FLEET_E_REFUSED, 1, &log);
  CHECK_CONTAINS(log.line[0], "READONLY");
  lr_fleet_free(f);
  redis_stop(&rep);
}

int main(void) {
  if (redis_start(&SRV, (const char *)NULL) != 0) {
    fprintf(stderr, "cannot start redis-server (make deps installs it)\n");
    return 1;
  }
  snprintf(URL, sizeof URL, "redis://127.0.0.1:%d/0", SRV.port);
  snprintf(UNIX_URL, sizeof UNIX_URL, "unix://%s", SRV.sock);
  test_budget_shared();
  test_batched_outcomes();
  test_throttle_shared();
  test_throttle_unrequest();
  test_throttled_and_spent();
  test_breaker_seen_within_sync();
  test_half_open_probes();
  test_permits_handed_back();
  test_script_flush();
  test_reserve_script();
  test_reserve_folded();
  test_first_sync();
  test_status_and_reset();
  test_database();
  test_threads();
  test_never_answers();
  test_connect_timeout();
  test_unreachable();
  test_passwords();
  test_readonly_replica();
  test_killed_server();
  test_stopped_server();
  test_flush_after_early_cut();
  redis_stop(&SRV);
  return check_done();
}
