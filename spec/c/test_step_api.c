/* test_step_api.c: the step API as an event-loop host uses it.  Load a
 * policy, begin a call, report each attempt's outcome and follow the
 * decision; nothing here sleeps except the one real-clock wait at the end. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include "step_support.h"

#ifndef LUARETRY_DATADIR
#define LUARETRY_DATADIR "."
#endif

#define FIXTURE "spec/fixtures/c_step.lua"

/* Line numbers below matter: is_transient is defined on line 6 and raises
 * on line 7. */
static const char SVC[] =
  "name = \"svc\"\n"      /* 1 */
  "max_attempts = 6\n"    /* 2 */
  "deadline = 10\n"       /* 3 */
  "attempt_timeout = 4\n" /* 4 */
  "backoff = { initial = 1, multiplier = 2, max = 3, jitter = \"none\" }\n"
  "function is_transient(status, body, info)\n"                      /* 6 */
  "  if status == 418 then error(\"teapot \" .. info.attempt) end\n" /* 7 */
  "  if status == 419 then return \"maybe\" end\n"
  "  if status == 420 then return 0.75 end\n"
  "  if status == 421 then return -1 end\n"
  "  return status == 503 or status == 429\n"
  "end\n";

/* No is_transient: the default classifier decides. */
static const char PLAIN[] =
  "max_attempts = 3\n"
  "backoff = { initial = 0.5, jitter = \"none\" }\n";

static const char SIM[] =
  "name = \"sim\"\n"
  "max_attempts = 8\n"
  "backoff = { initial = 0.5, multiplier = 2, max = 8, jitter = \"additive\","
  " jitter_max = 1 }\n";

static luaretry_code report(luaretry_call *c, int status, double retry_after,
                            luaretry_decision *d) {
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.status = status;
  o.body = "Service Unavailable";
  o.body_len = strlen(o.body);
  o.method = "GET";
  o.url = "http://example.invalid/";
  o.retry_after = retry_after;
  return luaretry_call_report(c, &o, d);
}

/* Reports `status`, checks a retry decision, then waits as the host would. */
static void expect_retry(luaretry_call *c, int status, int attempt, double elapsed, double wait,
                         double next_timeout, luaretry_wait_source src, const char *rule) {
  luaretry_decision d;
  CHECK_CODE(report(c, status, -1, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 1);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_NONE);
  CHECK_EQ_STR(luaretry_reason_name(d.reason), "retry");
  CHECK_EQ_INT(d.attempt, attempt);
  CHECK_EQ_DBL(d.elapsed, elapsed);
  CHECK_EQ_DBL(d.wait, wait);
  CHECK_EQ_DBL(d.next_timeout, next_timeout);
  CHECK_EQ_DBL(luaretry_call_timeout(c), next_timeout);
  CHECK_EQ_STR(luaretry_wait_source_name(d.wait_source), luaretry_wait_source_name(src));
  CHECK_EQ_STR(d.rule, rule);
  CHECK(d.message == NULL);
  CHECK(d.hook_error == NULL);
  CHECK_CODE(luaretry_call_wait(c, d.wait), LUARETRY_OK);
  CHECK_EQ_DBL(luaretry_call_elapsed(c), elapsed + wait);
}

static void expect_stop(luaretry_call *c, int status, luaretry_reason reason, const char *name,
                        int attempt, const char *rule, luaretry_decision *d) {
  CHECK_CODE(report(c, status, -1, d), LUARETRY_OK);
  CHECK_EQ_INT(d->retry, 0);
  CHECK_EQ_INT(d->reason, reason);
  CHECK_EQ_STR(luaretry_reason_name(d->reason), name);
  CHECK_EQ_INT(d->attempt, attempt);
  CHECK_EQ_DBL(d->wait, 0);
  CHECK_EQ_DBL(d->next_timeout, 0);
  CHECK_EQ_INT(d->wait_source, LUARETRY_WAIT_NONE);
  CHECK_EQ_STR(d->rule, rule);
  CHECK_EQ_DBL(luaretry_call_timeout(c), 0);
}

/* 503, 503, 200 with jitter "none": waits 1 and 2, then success. */
static void test_success_after_retries(luaretry_policy *p, const char *rule) {
  luaretry_call *c = step_begin(p, 1);
  CHECK_EQ_DBL(luaretry_call_timeout(c), 4); /* attempt_timeout < deadline */
  CHECK_EQ_DBL(luaretry_call_elapsed(c), 0);
  expect_retry(c, 503, 1, 0, 1, 4, LUARETRY_WAIT_BACKOFF, rule);
  expect_retry(c, 503, 2, 1, 2, 4, LUARETRY_WAIT_BACKOFF, rule);
  luaretry_decision d;
  expect_stop(c, 200, LUARETRY_REASON_SUCCESS, "success", 3, "default", &d);
  CHECK_EQ_DBL(d.elapsed, 3);
  CHECK(d.message == NULL);

  /* A stopped call refuses further reports, and says why. */
  CHECK_CODE(report(c, 503, -1, &d), LUARETRY_E_STATE);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "already stopped");
  CHECK_CONTAINS(luaretry_call_errmsg(c), "success");
  CHECK_EQ_INT(d.retry, 0);
  luaretry_call_free(c);
}

/* All 503: waits 1, 2, 3 (capped), 3 (capped); the timeout of the attempt
 * starting at 9 s is clipped to the 1 s left; then the deadline stops it. */
static void test_deadline(luaretry_policy *p, const char *rule) {
  luaretry_call *c = step_begin(p, 2);
  expect_retry(c, 503, 1, 0, 1, 4, LUARETRY_WAIT_BACKOFF, rule);
  expect_retry(c, 503, 2, 1, 2, 4, LUARETRY_WAIT_BACKOFF, rule);
  expect_retry(c, 503, 3, 3, 3, 4, LUARETRY_WAIT_CLAMPED, rule);
  expect_retry(c, 503, 4, 6, 3, 1, LUARETRY_WAIT_CLAMPED, rule);
  luaretry_decision d;
  expect_stop(c, 503, LUARETRY_REASON_DEADLINE, "deadline", 5, "deadline", &d);
  CHECK_EQ_DBL(d.elapsed, 9);
  CHECK_CONTAINS(d.message, "deadline");
  CHECK_CODE(report(c, 200, -1, &d), LUARETRY_E_STATE);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "deadline");
  luaretry_call_free(c);
}

/* A list of independent checks on one policy, each a few lines: split, it
 * would only scatter the policy text they share. */
static void test_string_policy(void) {
  luaretry_policy *p = step_load("@svc.lua", SVC);
  if (!p) return;
  CHECK_EQ_INT(luaretry_policy_warning_count(p), 0);
  test_success_after_retries(p, "svc.lua:6");
  test_deadline(p, "svc.lua:6");

  luaretry_call *c = step_begin(p, 3);
  luaretry_decision d;
  /* Not transient: final, decided by the script. */
  expect_stop(c, 404, LUARETRY_REASON_FINAL, "final", 1, "svc.lua:6", &d);
  luaretry_call_free(c);

  /* A number from is_transient is the wait. */
  c = step_begin(p, 3);
  expect_retry(c, 420, 1, 0, 0.75, 4, LUARETRY_WAIT_SCRIPT, "svc.lua:6");
  luaretry_call_free(c);

  /* A Lua error is a policy error naming file and line; report is OK. */
  c = step_begin(p, 3);
  expect_retry(c, 503, 1, 0, 1, 4, LUARETRY_WAIT_BACKOFF, "svc.lua:6");
  expect_stop(c, 418, LUARETRY_REASON_POLICY_ERROR, "policy_error", 2, "svc.lua:6", &d);
  CHECK_CONTAINS(d.message, "svc.lua:7:");
  CHECK_CONTAINS(d.message, "teapot 2"); /* info.attempt reached the script */
  CHECK_CODE(report(c, 503, -1, &d), LUARETRY_E_STATE);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "policy_error");
  luaretry_call_free(c);

  /* Any other value is a policy error, never a guess. */
  c = step_begin(p, 3);
  expect_stop(c, 419, LUARETRY_REASON_POLICY_ERROR, "policy_error", 1, "svc.lua:6", &d);
  CHECK_CONTAINS(d.message, "string");
  luaretry_call_free(c);
  c = step_begin(p, 3);
  expect_stop(c, 421, LUARETRY_REASON_POLICY_ERROR, "policy_error", 1, "svc.lua:6", &d);
  CHECK_CONTAINS(d.message, "-1");
  luaretry_call_free(c);

  /* Retry-After: at least what the server asked; too far ends the call. */
  c = step_begin(p, 3);
  CHECK_CODE(report(c, 503, 2.5, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 1);
  CHECK_EQ_DBL(d.wait, 2.5);
  CHECK_EQ_INT(d.wait_source, LUARETRY_WAIT_SERVER);
  CHECK_EQ_STR(luaretry_wait_source_name(d.wait_source), "server");
  CHECK_EQ_DBL(d.next_timeout, 4);
  luaretry_call_wait(c, d.wait);
  CHECK_CODE(report(c, 503, 0.5, &d), LUARETRY_OK); /* backoff 2 is longer */
  CHECK_EQ_DBL(d.wait, 2);
  CHECK_EQ_INT(d.wait_source, LUARETRY_WAIT_BACKOFF);
  luaretry_call_wait(c, d.wait);
  CHECK_CODE(report(c, 503, 6, &d), LUARETRY_OK); /* 4.5 + 6 > 10 */
  CHECK_EQ_INT(d.retry, 0);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_DEADLINE);
  CHECK_EQ_STR(d.rule, "retry_after");
  luaretry_call_free(c);
  c = step_begin(p, 3);
  CHECK_CODE(report(c, 503, 400, &d), LUARETRY_OK); /* > max_retry_after */
  /* not a deadline: no deadline was reached, the server asked too much */
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_SERVER_WAIT_TOO_LONG);
  CHECK_EQ_STR(luaretry_reason_name(d.reason), "server_wait_too_long");
  CHECK_EQ_STR(d.rule, "max_retry_after");
  CHECK_CONTAINS(d.message, "max_retry_after");
  luaretry_call_free(c);
  /* +infinity (a host's strtod of "1e999") asks more than any bound: it
   * was taken for no Retry-After and retried after the backoff */
  c = step_begin(p, 3);
  CHECK_CODE(report(c, 503, INFINITY, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_SERVER_WAIT_TOO_LONG);
  CHECK_CONTAINS(d.message, "the server asked for inf s");
  luaretry_call_free(c);
  c = step_begin(p, 3);
  CHECK_CODE(report(c, 503, NAN, &d), LUARETRY_OK); /* not a number: none */
  CHECK_EQ_INT(d.retry, 1);
  CHECK_EQ_INT(d.wait_source, LUARETRY_WAIT_BACKOFF);
  luaretry_call_free(c);

  /* Cancel: a wait returns at once, the next report stops the call. */
  c = step_begin(p, 3);
  CHECK_EQ_INT(luaretry_call_cancelled(c), 0);
  luaretry_call_cancel(c);
  CHECK_EQ_INT(luaretry_call_cancelled(c), 1);
  CHECK_CODE(luaretry_call_wait(c, 1), LUARETRY_E_CANCELLED);
  CHECK_EQ_DBL(luaretry_call_elapsed(c), 0);
  expect_stop(c, 503, LUARETRY_REASON_CANCELLED, "cancelled", 1, "cancel", &d);
  luaretry_call_free(c);

  luaretry_policy_free(p);
}

static void test_file_policy(void) {
  luaretry_policy *p = NULL;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  luaretry_code rc = luaretry_policy_load_file(p, FIXTURE);
  if (!CHECK_CODE(rc, LUARETRY_OK)) {
    fprintf(stderr, "  %s\n", luaretry_policy_errmsg(p));
    luaretry_policy_free(p);
    return;
  }
  luaretry_tuning t;
  CHECK_CODE(luaretry_policy_tuning(p, &t), LUARETRY_OK);
  CHECK_EQ_STR(t.name, "c-step");
  CHECK_EQ_STR(t.source, FIXTURE);
  test_success_after_retries(p, FIXTURE ":7");
  test_deadline(p, FIXTURE ":7");
  luaretry_call *c = step_begin(p, 9);
  luaretry_decision d;
  expect_stop(c, 418, LUARETRY_REASON_POLICY_ERROR, "policy_error", 1, FIXTURE ":7", &d);
  CHECK_CONTAINS(d.message, FIXTURE ":8:");
  CHECK_CONTAINS(d.message, "teapot at attempt 1");
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* The default classifier's rule is "default"; default max backoff is 32. */
static void test_default_classifier(void) {
  luaretry_policy *p = step_load("@plain.lua", PLAIN);
  if (!p) return;
  luaretry_tuning t;
  CHECK_CODE(luaretry_policy_tuning(p, &t), LUARETRY_OK);
  CHECK_EQ_STR(t.name, "plain"); /* from the chunk name */
  CHECK_EQ_STR(t.source, "plain.lua");
  CHECK_EQ_INT(t.max_attempts, 3);
  CHECK_EQ_DBL(t.deadline, 0);
  CHECK_EQ_DBL(t.attempt_timeout, 0);
  CHECK_EQ_INT(t.kind, LUARETRY_BACKOFF_EXPONENTIAL);
  CHECK_EQ_DBL(t.initial, 0.5);
  CHECK_EQ_DBL(t.multiplier, 2);
  CHECK_EQ_DBL(t.max, 32);
  CHECK_EQ_INT(t.jitter, LUARETRY_JITTER_NONE);

  luaretry_call *c = step_begin(p, 1);
  CHECK_EQ_DBL(luaretry_call_timeout(c), 0); /* no timeout, no deadline */
  expect_retry(c, 503, 1, 0, 0.5, 0, LUARETRY_WAIT_BACKOFF, "default");
  expect_retry(c, 502, 2, 0.5, 1, 0, LUARETRY_WAIT_BACKOFF, "default");
  luaretry_decision d;
  expect_stop(c, 502, LUARETRY_REASON_EXHAUSTED, "exhausted", 3, "max_attempts", &d);
  CHECK_EQ_DBL(d.elapsed, 1.5);
  CHECK_EQ_INT(d.throttled, 0);
  luaretry_call_free(c);
  /* a 429 is throttling: the throttling backoff (1 s, full jitter) */
  c = step_begin(p, 1);
  CHECK_CODE(report(c, 429, -1, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 1);
  CHECK_EQ_INT(d.throttled, 1);
  CHECK_EQ_INT(d.wait_source, LUARETRY_WAIT_THROTTLE);
  CHECK(d.wait >= 0 && d.wait <= 1);
  luaretry_call_free(c);

  c = step_begin(p, 1);
  expect_stop(c, 404, LUARETRY_REASON_FINAL, "final", 1, "default", &d);
  luaretry_call_free(c);
  c = step_begin(p, 1);
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.status = 0;
  o.error = "connect";
  CHECK_CODE(luaretry_call_report(c, &o, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 1);
  CHECK_EQ_STR(d.rule, "default");
  luaretry_call_free(c);
  luaretry_policy_free(p);

  /* Without backoff.max the cap is 32 s, or initial when that is larger. */
  p = step_load("@big.lua", "deadline = 600\nbackoff = { initial = 40 }\n");
  if (p) {
    CHECK_CODE(luaretry_policy_tuning(p, &t), LUARETRY_OK);
    CHECK_EQ_DBL(t.max, 40);
    CHECK_EQ_DBL(t.deadline, 600);
    CHECK_EQ_INT(t.max_attempts, 0);
    CHECK_EQ_INT(t.jitter, LUARETRY_JITTER_ADDITIVE); /* the default */
    CHECK_EQ_DBL(t.jitter_max, 1);
    CHECK_EQ_INT(t.cap_jitter, 0);
    CHECK_EQ_INT(t.retry_after, 1);
    CHECK_EQ_DBL(t.max_retry_after, 300);
    CHECK_EQ_INT(t.body_limit, 64 * 1024);
    CHECK_EQ_INT(t.instruction_limit, 0); /* not counted: a time limit instead */
    CHECK_EQ_DBL(t.time_limit, 0.25);
    CHECK(t.memory_limit >= 64 * 1024);
  }
  luaretry_policy_free(p);
}

/* ---- the C classifier */

typedef struct {
  int calls;
  int last_attempt;
} classifier_state;

static luaretry_class classify(void *ud, const luaretry_outcome *o, int attempt, double *wait) {
  classifier_state *s = ud;
  s->calls++;
  s->last_attempt = attempt;
  switch (o->status) {
  case 200: return LUARETRY_CLASS_SUCCESS;
  case 503: return LUARETRY_CLASS_TRANSIENT; /* *wait stays < 0: backoff */
  case 429: *wait = 0.25; return LUARETRY_CLASS_TRANSIENT;
  case 420: return LUARETRY_CLASS_THROTTLING;
  case 599: return LUARETRY_CLASS_ERROR;
  case 598: return (luaretry_class)42;                         /* a host bug: not a guess either */
  case 597: *wait = NAN; return LUARETRY_CLASS_TRANSIENT;      /* a host bug too */
  case 596: *wait = INFINITY; return LUARETRY_CLASS_TRANSIENT; /* never: not a wait */
  default: return LUARETRY_CLASS_FINAL;
  }
}

static void test_c_classifier(void) {
  luaretry_policy *p = step_load("@svc.lua", SVC);
  if (!p) return;
  classifier_state s = { 0, 0 };
  CHECK_CODE(luaretry_policy_set_classifier(p, classify, &s), LUARETRY_OK);
  luaretry_call *c = step_begin(p, 1);
  expect_retry(c, 503, 1, 0, 1, 4, LUARETRY_WAIT_BACKOFF, "host classifier");
  expect_retry(c, 429, 2, 1, 0.25, 4, LUARETRY_WAIT_SCRIPT, "host classifier");
  CHECK_EQ_INT(s.last_attempt, 2);
  luaretry_decision d;
  expect_stop(c, 200, LUARETRY_REASON_SUCCESS, "success", 3, "host classifier", &d);
  CHECK_EQ_INT(s.calls, 3);
  luaretry_call_free(c);

  /* 418 raises in the script, but the C classifier has the say now. */
  c = step_begin(p, 1);
  expect_stop(c, 418, LUARETRY_REASON_FINAL, "final", 1, "host classifier", &d);
  luaretry_call_free(c);
  c = step_begin(p, 1);
  expect_stop(c, 599, LUARETRY_REASON_POLICY_ERROR, "policy_error", 1, "host classifier", &d);
  CHECK_CONTAINS(d.message, "host classifier failed");
  luaretry_call_free(c);
  c = step_begin(p, 1);
  expect_stop(c, 598, LUARETRY_REASON_POLICY_ERROR, "policy_error", 1, "host classifier", &d);
  CHECK_CONTAINS(d.message, "unknown class");
  luaretry_call_free(c);
  /* a wait that is no number of seconds: named, as the script's is (it
   * was dropped for the backoff without a word) */
  c = step_begin(p, 1);
  expect_stop(c, 597, LUARETRY_REASON_POLICY_ERROR, "policy_error", 1, "host classifier", &d);
  CHECK_CONTAINS(d.message, "host classifier set a wait of nan");
  luaretry_call_free(c);
  c = step_begin(p, 1);
  expect_stop(c, 596, LUARETRY_REASON_POLICY_ERROR, "policy_error", 1, "host classifier", &d);
  CHECK_CONTAINS(d.message, "host classifier set a wait of inf");
  luaretry_call_free(c);
  /* a host classifier can say throttling: the throttling backoff */
  c = step_begin(p, 1);
  CHECK_CODE(report(c, 420, -1, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 1);
  CHECK_EQ_INT(d.throttled, 1);
  CHECK_EQ_INT(d.wait_source, LUARETRY_WAIT_THROTTLE);
  luaretry_call_free(c);

  /* Removing it gives the script back its judgement. */
  CHECK_CODE(luaretry_policy_set_classifier(p, NULL, NULL), LUARETRY_OK);
  c = step_begin(p, 1);
  expect_stop(c, 418, LUARETRY_REASON_POLICY_ERROR, "policy_error", 1, "svc.lua:6", &d);
  luaretry_call_free(c);
  CHECK_EQ_INT(s.calls, 9);
  luaretry_policy_free(p);
}

/* ---- simulate */

#define MAX_RECORD 64
typedef struct {
  int n, stop_after;
  double waits[MAX_RECORD];
  luaretry_decision last; /* its strings live only during the callback: */
  char last_rule[64];     /* copied here */
} record;

static int on_decision(void *ud, const luaretry_decision *d) {
  record *r = ud;
  if (r->n < MAX_RECORD) r->waits[r->n] = d->wait;
  r->n++;
  r->last = *d;
  snprintf(r->last_rule, sizeof r->last_rule, "%s", d->rule ? d->rule : "");
  r->last.rule = r->last_rule;
  r->last.message = NULL;
  r->last.hook_error = NULL;
  return r->stop_after && r->n >= r->stop_after;
}

static void test_simulate(void) {
  luaretry_policy *p = step_load("@sim.lua", SIM);
  if (!p) return;
  record a = { 0 }, b = { 0 }, other = { 0 };
  CHECK_CODE(luaretry_simulate(p, 42, 0, on_decision, &a), LUARETRY_OK);
  CHECK_CODE(luaretry_simulate(p, 42, 0, on_decision, &b), LUARETRY_OK);
  CHECK_CODE(luaretry_simulate(p, 43, 0, on_decision, &other), LUARETRY_OK);
  CHECK_EQ_INT(a.n, 8);
  CHECK_EQ_INT(b.n, 8);
  CHECK(memcmp(a.waits, b.waits, sizeof a.waits) == 0); /* bit for bit */
  CHECK(memcmp(a.waits, other.waits, 7 * sizeof(double)) != 0);
  CHECK_EQ_INT(a.last.reason, LUARETRY_REASON_EXHAUSTED);
  CHECK_EQ_INT(a.last.attempt, 8);
  /* Additive jitter: min(d, 8) + [0, 1]. */
  double sum = 0;
  for (int i = 0; i < 7; i++) {
    double v = fmin(0.5 * pow(2, i), 8);
    CHECK(a.waits[i] >= v && a.waits[i] <= v + 1);
    sum += a.waits[i];
  }
  CHECK_EQ_DBL(a.last.elapsed, sum);

  /* The step API with the same seed gives the same schedule. */
  luaretry_call *c = step_begin(p, 42);
  luaretry_decision d;
  for (int i = 0; i < 7; i++) {
    CHECK_CODE(report(c, 503, -1, &d), LUARETRY_OK);
    CHECK_EQ_INT(d.retry, 1);
    CHECK_EQ_DBL(d.wait, a.waits[i]);
    luaretry_call_wait(c, d.wait);
  }
  CHECK_EQ_DBL(luaretry_call_elapsed(c), sum);
  luaretry_call_free(c);

  record shorter = { 0 }, early = { .stop_after = 2 };
  CHECK_CODE(luaretry_simulate(p, 42, 3, on_decision, &shorter), LUARETRY_OK);
  CHECK_EQ_INT(shorter.n, 3);
  CHECK(memcmp(shorter.waits, a.waits, 2 * sizeof(double)) == 0);
  CHECK_EQ_STR(shorter.last.rule, "max_attempts");
  CHECK_CODE(luaretry_simulate(p, 42, 0, on_decision, &early), LUARETRY_OK);
  CHECK_EQ_INT(early.n, 2);
  CHECK_CODE(luaretry_simulate(p, 42, 0, NULL, NULL), LUARETRY_OK);
  luaretry_policy_free(p);
}

/* ---- overrides */

/* Each override in turn, set and read back: a flat list of checks. */
static void test_overrides(void) {
  luaretry_policy *p = NULL;
  luaretry_tuning t;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  /* Before load: kept, and applied over the script's values. */
  CHECK_CODE(luaretry_policy_set(p, "max_attempts", "4"), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_set(p, "backoff.initial", "0.25"), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_set(p, "backoff.max", "1"), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_tuning(p, &t), LUARETRY_E_STATE);
  CHECK_CODE(luaretry_policy_load_string(p, "@svc.lua", SVC), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_tuning(p, &t), LUARETRY_OK);
  CHECK_EQ_INT(t.max_attempts, 4);
  CHECK_EQ_DBL(t.initial, 0.25);
  CHECK_EQ_DBL(t.max, 1);
  CHECK_EQ_DBL(t.deadline, 10); /* the script's */
  luaretry_call *before = step_begin(p, 1);

  /* After load: a bad value is refused, naming the field; nothing moves. */
  static const char *const bad[][2] = {
    { "max_attempts", "0" },          { "max_attempts", "many" }, { "deadline", "-1" },
    { "backoff.jitter", "sideways" }, { "backoff.max", "0.1" }, /* below initial */
    { "retry_after", "maybe" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK_CODE(luaretry_policy_set(p, bad[i][0], bad[i][1]), LUARETRY_E_ARG);
    CHECK_CONTAINS(luaretry_policy_errmsg(p), bad[i][0]);
  }
  CHECK_CODE(luaretry_policy_set(p, "max_attemps", "3"), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "did you mean max_attempts");
  CHECK_CODE(luaretry_policy_set(p, "is_transient", "true"), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "is_transient");
  CHECK_CODE(luaretry_policy_set(p, "memory_limit", "100"), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "memory_limit");
  luaretry_tuning same;
  CHECK_CODE(luaretry_policy_tuning(p, &same), LUARETRY_OK);
  CHECK(memcmp(&t, &same, sizeof t) == 0);

  /* A good value applies at once; a call already begun keeps its rules. */
  CHECK_CODE(luaretry_policy_set(p, "max_attempts", "2"), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_set(p, "deadline", "none"), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_set(p, "instruction_limit", "20000"), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_tuning(p, &t), LUARETRY_OK);
  CHECK_EQ_INT(t.max_attempts, 2);
  CHECK_EQ_DBL(t.deadline, 0);
  CHECK_EQ_INT(t.instruction_limit, 20000);
  luaretry_decision d;
  expect_retry(before, 503, 1, 0, 0.25, 4, LUARETRY_WAIT_BACKOFF, "svc.lua:6");
  expect_retry(before, 503, 2, 0.25, 0.5, 4, LUARETRY_WAIT_BACKOFF, "svc.lua:6");
  luaretry_call_free(before);
  luaretry_call *after = step_begin(p, 1);
  CHECK_EQ_DBL(luaretry_call_timeout(after), 4); /* no deadline to clip */
  expect_retry(after, 503, 1, 0, 0.25, 4, LUARETRY_WAIT_BACKOFF, "svc.lua:6");
  expect_stop(after, 503, LUARETRY_REASON_EXHAUSTED, "exhausted", 2, "max_attempts", &d);
  luaretry_call_free(after);

  /* Overrides outlive a reload. */
  CHECK_CODE(luaretry_policy_load_string(p, "@svc.lua", SVC), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_tuning(p, &t), LUARETRY_OK);
  CHECK_EQ_INT(t.max_attempts, 2);
  CHECK_EQ_DBL(t.deadline, 0);
  luaretry_policy_free(p);

  /* Before load a value cannot be judged yet: the load names it. */
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_set(p, "max_attempts", "lots"), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_load_string(p, "@svc.lua", SVC), LUARETRY_E_POLICY);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "max_attempts");
  CHECK_CODE(luaretry_policy_set(p, "max_attempts", "3"), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_load_string(p, "@svc.lua", SVC), LUARETRY_OK);
  luaretry_policy_free(p);
}

/* ---- warnings */

static void test_warnings(void) {
  luaretry_policy *p = step_load("@w.lua",
                                 "max_attemps = 3\n"
                                 "deadline = 5\n"
                                 "backoff = { intial = 1, multiplier = 0.5 }\n");
  if (!p) return;
  size_t n = luaretry_policy_warning_count(p);
  CHECK_EQ_INT(n, 3);
  int typo = 0, nested = 0, clamped = 0;
  for (size_t i = 0; i < n; i++) {
    const char *w = luaretry_policy_warning(p, i);
    if (!CHECK(w != NULL)) continue;
    if (strstr(w, "w.lua:1") && strstr(w, "max_attemps") && strstr(w, "did you mean max_attempts"))
      typo = 1;
    if (strstr(w, "w.lua:3") && strstr(w, "backoff.intial") &&
        strstr(w, "did you mean backoff.initial"))
      nested = 1;
    if (strstr(w, "backoff.multiplier") && strstr(w, "clamped")) clamped = 1;
  }
  CHECK(typo);
  CHECK(nested);
  CHECK(clamped);
  CHECK(luaretry_policy_warning(p, n) == NULL);
  luaretry_tuning t;
  CHECK_CODE(luaretry_policy_tuning(p, &t), LUARETRY_OK);
  CHECK_EQ_DBL(t.multiplier, 1);
  CHECK_EQ_INT(t.max_attempts, 0); /* the typo set nothing */

  /* A failed reload keeps the warnings of the policy still loaded. */
  CHECK_CODE(luaretry_policy_load_string(p, "@x.lua", "max_attempts = ="), LUARETRY_E_SYNTAX);
  CHECK_EQ_INT(luaretry_policy_warning_count(p), 3);
  /* A clean load clears them. */
  CHECK_CODE(luaretry_policy_load_string(p, "@svc.lua", SVC), LUARETRY_OK);
  CHECK_EQ_INT(luaretry_policy_warning_count(p), 0);
  luaretry_policy_free(p);
}

/* ---- a failed reload keeps the old policy */

static void test_failed_reload(void) {
  luaretry_policy *p = step_load("@svc.lua", SVC);
  if (!p) return;
  luaretry_tuning before, t;
  CHECK_CODE(luaretry_policy_tuning(p, &before), LUARETRY_OK);

  static const struct {
    const char *chunk, *src;
    luaretry_code rc;
    const char *msg;
  } bad[] = {
    { "@broken.lua", "name = \"broken\"\nmax_attempts = = 3\n", LUARETRY_E_SYNTAX,
      "broken.lua:2:" },
    { "@invalid.lua", "name = \"invalid\"\nmax_attempts = -2\n", LUARETRY_E_POLICY,
      "invalid.lua:2: max_attempts" },
    { "@raises.lua", "name = \"raises\"\nmax_attempts = 3\nerror('no')\n", LUARETRY_E_POLICY,
      "raises.lua:3:" },
    { "@forever.lua", "name = \"forever\"\n", LUARETRY_E_POLICY, "retry forever" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK_CODE(luaretry_policy_load_string(p, bad[i].chunk, bad[i].src), bad[i].rc);
    CHECK_CONTAINS(luaretry_policy_errmsg(p), bad[i].msg);
    CHECK_CODE(luaretry_policy_tuning(p, &t), LUARETRY_OK);
    CHECK_EQ_STR(t.name, "svc");
    CHECK_EQ_STR(t.source, "svc.lua");
    CHECK_EQ_INT(t.max_attempts, before.max_attempts);
    CHECK_EQ_DBL(t.initial, before.initial);
  }
  CHECK_CODE(luaretry_policy_load_file(p, "spec/fixtures/c_missing.lua"), LUARETRY_E_IO);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "spec/fixtures/c_missing.lua");
  /* The old script still judges. */
  test_success_after_retries(p, "svc.lua:6");
  luaretry_call *c = step_begin(p, 1);
  luaretry_decision d;
  expect_stop(c, 418, LUARETRY_REASON_POLICY_ERROR, "policy_error", 1, "svc.lua:6", &d);
  CHECK_CONTAINS(d.message, "svc.lua:7:");
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* ---- the real clock */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_real_clock(void) {
  luaretry_policy *p = step_load("@svc.lua", SVC);
  if (!p) return;
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK); /* OS seed */
  if (c) {
    double t0 = now();
    CHECK_CODE(luaretry_call_wait(c, 0.02), LUARETRY_OK);
    double took = now() - t0;
    CHECK(took >= 0.02);
    CHECK(took < 1); /* the wait, not a second one: room for a busy machine */
    CHECK(luaretry_call_elapsed(c) >= 0.02);
    t0 = now();
    CHECK_CODE(luaretry_call_wait(c, 0), LUARETRY_OK);
    CHECK_CODE(luaretry_call_wait(c, -1), LUARETRY_OK);
    CHECK(now() - t0 < 1); /* at once: -1 is no wait, not a huge one */
    luaretry_decision d;
    CHECK_CODE(report(c, 503, -1, &d), LUARETRY_OK);
    CHECK_EQ_INT(d.retry, 1);
    CHECK(d.elapsed >= 0.02 && d.elapsed < 1);
    CHECK_EQ_DBL(d.wait, 1);
    CHECK_NEAR(d.next_timeout, 4, 1e-9);
  }
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* The first wait of a new call seeded from the OS: full jitter, in [0, 1]. */
static double first_wait(luaretry_policy *p) {
  luaretry_call *c = NULL;
  double w = -1;
  luaretry_decision d;
  if (luaretry_call_begin(p, NULL, &c) == LUARETRY_OK && report(c, 503, -1, &d) == LUARETRY_OK &&
      d.retry)
    w = d.wait;
  luaretry_call_free(c);
  return w;
}

/* Calls seeded from the OS (by way of their thread's generator) draw
 * apart, and so do a forked child and its parent after the fork. */
static void test_os_seeds(void) {
  luaretry_policy *p =
    step_load("=jitter", "max_attempts = 3\nbackoff = { initial = 1, jitter = 'full' }\n");
  if (!p) return;
  double a = first_wait(p), b = first_wait(p);
  CHECK(a >= 0 && a <= 1 && b >= 0 && b <= 1);
  CHECK(a != b);
  int fds[2];
  if (!CHECK(pipe(fds) == 0)) return;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    double w = first_wait(p);
    _exit(write(fds[1], &w, sizeof w) == (ssize_t)sizeof w ? 0 : 1);
  }
  double mine = first_wait(p), child = -2;
  CHECK(pid > 0 && read(fds[0], &child, sizeof child) == (ssize_t)sizeof child);
  int status = 1;
  if (pid > 0) waitpid(pid, &status, 0);
  CHECK_EQ_INT(status, 0);
  CHECK(child >= 0 && child <= 1);
  CHECK(mine != child); /* the child does not repeat its parent's stream */
  close(fds[0]);
  close(fds[1]);
  luaretry_policy_free(p);
}

static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  if (!d) return -1;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

/* A call that waits on the real clock opens an eventfd (for cancel); one
 * never cancelled serves later calls, so a thousand calls one after the
 * other leave no more than a few open, and a cancelled call's wakeup does
 * not reach the next call: its wait lasts. */
static void test_wakeup_fds(void) {
  luaretry_policy *p = step_load("@svc.lua", SVC);
  if (!p) return;
  int before = open_fds();
  for (int i = 0; i < 1000; i++) {
    luaretry_call *c = NULL;
    if (!CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK)) break;
    CHECK_CODE(luaretry_call_wait(c, 1e-6), LUARETRY_OK);
    luaretry_call_free(c);
  }
  int after = open_fds();
  CHECK(before > 0 && after <= before + 4);
  luaretry_call *c = NULL, *next = NULL;
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
  CHECK_CODE(luaretry_call_wait(c, 1e-6), LUARETRY_OK); /* it has its fd */
  luaretry_call_cancel(c);
  CHECK_CODE(luaretry_call_wait(c, 10), LUARETRY_E_CANCELLED);
  luaretry_call_free(c);
  CHECK_CODE(luaretry_call_begin(p, NULL, &next), LUARETRY_OK);
  double t0 = now();
  CHECK_CODE(luaretry_call_wait(next, 0.02), LUARETRY_OK);
  CHECK(now() - t0 >= 0.02);
  luaretry_call_free(next);
  luaretry_policy_free(p);
}

/* A workflow's call (LUARETRY_CALL_WORKFLOW) asks no rate token for its
 * rounds: its requests' calls (LUARETRY_CALL_WORKFLOW_REQUEST) take them;
 * one whose token comes past the deadline ends the workflow's call for
 * that reason (luaretry_call_stop_as), which luaretry_call_run returns. */
static luaretry_code workflow_round(void *ud, luaretry_call *c, int attempt, double timeout,
                                    luaretry_outcome *out) {
  (void)attempt, (void)timeout, (void)out;
  luaretry_policy *p = ud;
  for (int i = 0; i < 2; i++) {
    luaretry_call_options o;
    luaretry_call_options_init(&o);
    o.flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME | LUARETRY_CALL_WORKFLOW_REQUEST |
              LUARETRY_CALL_NO_HEDGE;
    luaretry_call *r = NULL;
    if (!CHECK_CODE(luaretry_call_begin(p, &o, &r), LUARETRY_OK)) return LUARETRY_E_STATE;
    luaretry_decision d, stop;
    CHECK_CODE(luaretry_call_next(r, &d), LUARETRY_OK);
    if (i == 0) { /* the first request's token is free */
      CHECK(d.retry && d.wait == 0);
      luaretry_call_free(r);
      continue;
    }
    /* the second's comes in 1 s, past the deadline (0.5 s) */
    CHECK(!d.retry && d.reason == LUARETRY_REASON_RATE_LIMIT);
    luaretry_decision going = d;
    going.retry = 1;
    CHECK_CODE(luaretry_call_stop_as(c, &going, &stop), LUARETRY_E_ARG);
    CHECK_CONTAINS(luaretry_call_errmsg(c), "did not stop");
    /* a reason past the enum (an uninitialised decision) is refused,
     * never an index into the counters (UBSan: out of bounds) */
    going.retry = 0;
    going.reason = (luaretry_reason)999;
    memset(&stop, 0x5a, sizeof stop); /* a refusal clears it, as a report's does */
    CHECK_CODE(luaretry_call_stop_as(c, &going, &stop), LUARETRY_E_ARG);
    CHECK_CONTAINS(luaretry_call_errmsg(c), "reason 999");
    CHECK(stop.rule == NULL && stop.message == NULL && stop.reason == LUARETRY_REASON_NONE);
    going.reason = (luaretry_reason)-1;
    CHECK_CODE(luaretry_call_stop_as(c, &going, &stop), LUARETRY_E_ARG);
    CHECK_CODE(luaretry_call_stop_as(c, &d, &stop), LUARETRY_OK);
    CHECK(stop.reason == LUARETRY_REASON_RATE_LIMIT && !stop.retry);
    CHECK_EQ_STR(stop.rule, "rate");
    CHECK(stop.message && strncmp(stop.message, "a request of the workflow: ", 27) == 0);
    CHECK_CODE(luaretry_call_stop_as(c, &d, &stop), LUARETRY_E_STATE);
    CHECK_CONTAINS(luaretry_call_errmsg(c), "already stopped (rate_limit)");
    CHECK(stop.message == NULL); /* not the first stop's, which the next decision may move */
    luaretry_call_free(r);
  }
  return LUARETRY_E_OPERATION; /* the script's request failed */
}

static void test_workflow_requests(void) {
  luaretry_policy *p =
    step_load("@wf.lua", "max_attempts = 3\ndeadline = 0.5\nrate = { limit = 1, burst = 1 }\n");
  if (!p) return;
  luaretry_call_options o;
  luaretry_call_options_init(&o);
  o.flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME | LUARETRY_CALL_WORKFLOW;
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, &o, &c), LUARETRY_OK);
  luaretry_decision final;
  CHECK_CODE(luaretry_call_run(c, workflow_round, p, &final), LUARETRY_OK);
  CHECK(final.reason == LUARETRY_REASON_RATE_LIMIT && !final.retry);
  CHECK_EQ_STR(final.rule, "rate");
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* luaretry_call_stop_cancelled on a call that had stopped (its deadline,
 * or a cancel already told): it stays as it stopped, counted once; it was
 * stopped again as cancelled and counted in the metrics a second time. */
static void test_stop_cancelled_once(void) {
  luaretry_policy *p = step_load("@once.lua", "max_attempts = 3\ndeadline = 10\n");
  if (!p) return;
  luaretry_metrics m0, m1;
  luaretry_decision d;
  luaretry_call *c = step_begin(p, 1);
  CHECK_CODE(report(c, 200, -1, &d), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_metrics(p, &m0), LUARETRY_OK);
  luaretry_call_stop_cancelled(c, &d);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_SUCCESS); /* as it stopped */
  CHECK_EQ_INT(d.retry, 0);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "already stopped (success)");
  CHECK_CODE(luaretry_policy_metrics(p, &m1), LUARETRY_OK);
  CHECK_EQ_INT(m1.cancelled, m0.cancelled);
  luaretry_call_free(c);
  c = step_begin(p, 1);
  luaretry_call_stop_cancelled(c, &d);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_CANCELLED);
  CHECK_CODE(luaretry_policy_metrics(p, &m0), LUARETRY_OK);
  CHECK_EQ_INT(m0.cancelled, m1.cancelled + 1);
  luaretry_call_stop_cancelled(c, &d);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_CANCELLED);
  CHECK_EQ_STR(d.rule, "cancel");
  CHECK_CODE(luaretry_policy_metrics(p, &m1), LUARETRY_OK);
  CHECK_EQ_INT(m1.cancelled, m0.cancelled); /* once */
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

int main(void) {
  if (chdir(LUARETRY_DATADIR) != 0) {
    perror(LUARETRY_DATADIR);
    return 1;
  }
  test_string_policy();
  test_file_policy();
  test_default_classifier();
  test_c_classifier();
  test_simulate();
  test_overrides();
  test_warnings();
  test_failed_reload();
  test_real_clock();
  test_os_seeds();
  test_wakeup_fds();
  test_workflow_requests();
  test_stop_cancelled_once();
  return check_done();
}
