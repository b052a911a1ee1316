/* test_deadline.c: a call's own deadline (LUARETRY_CALL_DEADLINE), as a
 * host serving a request with its caller's deadline gives it: the earlier
 * of it and the policy's wins, in the step API and the blocking call; a
 * deadline passed, NaN or negative ends the call at once; no attempt starts
 * in its last millisecond.  Virtual clock
 * except where the blocking call runs on the real one. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "luaretry.h"
#include "check.h"

/* waits 1, 2, 3, 3... (no jitter), attempt_timeout 4, deadline 10 */
static const char SVC[] =
  "name = \"svc\"\n"
  "deadline = 10\n"
  "attempt_timeout = 4\n"
  "backoff = { initial = 1, multiplier = 2, max = 3, jitter = \"none\" }\n";

static luaretry_policy *load(const char *src) {
  luaretry_policy *p = NULL;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  if (!CHECK_CODE(luaretry_policy_load_string(p, "svc.lua", src), LUARETRY_OK))
    fprintf(stderr, "  %s\n", luaretry_policy_errmsg(p));
  return p;
}

static luaretry_call *begin(luaretry_policy *p, unsigned flags, double deadline) {
  luaretry_call_options o;
  luaretry_call_options_init(&o);
  o.flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME | flags;
  o.seed = 1;
  o.deadline = deadline;
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, &o, &c), LUARETRY_OK);
  CHECK(c != NULL);
  return c;
}

static luaretry_code report(luaretry_call *c, int status, luaretry_decision *d) {
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.status = status;
  return luaretry_call_report(c, &o, d);
}

/* The call's deadline, 2.5 s from now, comes before the policy's 10 s: the
 * first attempt's timeout is cut to it, the retry that would start at 3 s
 * is not made. */
static void test_earlier_wins(luaretry_policy *p) {
  double before = luaretry_clock_now();
  luaretry_call *c = begin(p, LUARETRY_CALL_DEADLINE, luaretry_deadline_in(2.5));
  double dl = luaretry_call_deadline(c);
  /* the time left when the call began: 2.5 s less what passed meanwhile */
  CHECK(dl <= 2.5 && dl > 2.5 - (luaretry_clock_now() - before) - 1e-9);
  CHECK_EQ_DBL(luaretry_call_timeout(c), dl); /* not the policy's 4 s */
  luaretry_decision d;
  CHECK_CODE(luaretry_call_next(c, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 1);
  CHECK_CODE(report(c, 503, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 1);
  CHECK_EQ_DBL(d.wait, 1);
  CHECK_NEAR(d.next_timeout, dl - 1, 1e-9);
  CHECK_CODE(luaretry_call_wait(c, d.wait), LUARETRY_OK);
  CHECK_CODE(report(c, 503, &d), LUARETRY_OK); /* the next would start at 3 s */
  CHECK_EQ_INT(d.retry, 0);
  CHECK_EQ_STR(luaretry_reason_name(d.reason), "deadline");
  CHECK_EQ_INT(d.attempt, 2);
  luaretry_call_free(c);
}

/* The policy's 10 s comes before the call's 100 s: the policy's wins. */
static void test_policy_wins(luaretry_policy *p) {
  luaretry_call *c = begin(p, LUARETRY_CALL_DEADLINE, luaretry_deadline_in(100));
  CHECK_EQ_DBL(luaretry_call_deadline(c), 10);
  CHECK_EQ_DBL(luaretry_call_timeout(c), 4);
  luaretry_call_free(c);
  /* +infinity is no deadline of the call's own */
  c = begin(p, LUARETRY_CALL_DEADLINE, INFINITY);
  CHECK_EQ_DBL(luaretry_call_deadline(c), 10);
  luaretry_call_free(c);
}

/* Zeroed options are no deadline: the field without the flag is ignored,
 * even when it names a time long past (0, the clock's origin). */
static void test_flag_needed(luaretry_policy *p) {
  luaretry_call *c = begin(p, 0, 0);
  CHECK_EQ_DBL(luaretry_call_deadline(c), 10);
  luaretry_decision d;
  CHECK_CODE(luaretry_call_next(c, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 1);
  luaretry_call_free(c);
}

/* Passed, NaN, negative: the call stops at once with reason DEADLINE, no
 * attempt, no wait, and counts as a deadline stop. */
static void test_bad_deadlines(luaretry_policy *p) {
  const double bad[] = { luaretry_deadline_in(-0.5), NAN, -1, -INFINITY, 0 };
  const char *says[] = { "passed", "not a time", "not a time", "not a time", "passed" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    luaretry_metrics before, after;
    CHECK_CODE(luaretry_policy_metrics(p, &before), LUARETRY_OK);
    luaretry_call *c = begin(p, LUARETRY_CALL_DEADLINE, bad[i]);
    luaretry_decision d;
    CHECK_CODE(luaretry_call_next(c, &d), LUARETRY_OK);
    CHECK_EQ_INT(d.retry, 0);
    CHECK_EQ_STR(luaretry_reason_name(d.reason), "deadline");
    CHECK_EQ_INT(d.attempt, 0);
    CHECK_EQ_DBL(d.wait, 0);
    CHECK(d.message != NULL);
    if (d.message) CHECK_CONTAINS(d.message, says[i]);
    CHECK_EQ_DBL(luaretry_call_elapsed(c), 0);
    CHECK_CODE(luaretry_policy_metrics(p, &after), LUARETRY_OK);
    CHECK_EQ_INT((int)(after.deadline_stops - before.deadline_stops), 1);
    luaretry_call_free(c);
  }
}

/* The blocking call on the real clock: every attempt fails, the backoff
 * is 50 ms, neither max_attempts nor the policy's deadline would stop it;
 * the call's own 300 ms does, and no attempt's timeout is longer. */
typedef struct {
  int attempts;
  double longest; /* the longest timeout an attempt was given */
} op_state;

static luaretry_code op(void *ud, luaretry_call *c, int attempt, double timeout,
                        luaretry_outcome *out) {
  (void)c;
  (void)attempt;
  op_state *s = ud;
  s->attempts++;
  if (timeout <= 0 || timeout > s->longest) s->longest = timeout <= 0 ? INFINITY : timeout;
  luaretry_outcome_init(out);
  out->status = 503;
  return LUARETRY_OK;
}

static void test_blocking(void) {
  luaretry_policy *p = load(
    "backoff = { initial = 0.05, multiplier = 1, jitter = \"none\" }\n"
    "max_attempts = 1000\nattempt_timeout = 60\n");
  luaretry_call_options o;
  luaretry_call_options_init(&o);
  o.flags = LUARETRY_CALL_DEADLINE;
  o.deadline = luaretry_deadline_in(0.3);
  op_state s = { 0, 0 };
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, &o, &c), LUARETRY_OK);
  luaretry_decision d;
  CHECK_CODE(luaretry_call_run(c, op, &s, &d), LUARETRY_OK);
  CHECK_EQ_STR(luaretry_reason_name(d.reason), "deadline");
  CHECK(s.attempts >= 1);
  /* every attempt's timeout ends by it, not the policy's 60 s */
  CHECK(s.longest > 0 && s.longest <= 0.3);
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* A host that asks for its attempt after the deadline passed (its timer
 * late on a busy machine) gets a stop, not an attempt; one that asks
 * before gets what is left as the timeout. */
static void test_asked_late(luaretry_policy *p) {
  luaretry_call_options o = { .flags = LUARETRY_CALL_DEADLINE,
                              .deadline = luaretry_deadline_in(5) };
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, &o, &c), LUARETRY_OK);
  luaretry_decision d;
  CHECK_CODE(luaretry_call_next(c, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 1);
  CHECK(d.next_timeout > 0 && d.next_timeout <= 4); /* the policy's attempt_timeout */
  luaretry_call_free(c);
  o.deadline = luaretry_deadline_in(0.05);
  CHECK_CODE(luaretry_call_begin(p, &o, &c), LUARETRY_OK);
  struct timespec nap = { 0, 100 * 1000 * 1000 }; /* 0.1 s: past it, whatever the load */
  nanosleep(&nap, NULL);
  CHECK_CODE(luaretry_call_next(c, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 0);
  CHECK_EQ_STR(luaretry_reason_name(d.reason), "deadline");
  CHECK_EQ_INT(d.attempt, 0);
  if (CHECK(d.message != NULL))
    CHECK_CONTAINS(d.message, "passed before the attempt was asked for");
  luaretry_call_free(c);
}

/* A call of p (virtual clock) whose first attempt timed out, reported
 * `at` seconds in; d the report's decision. */
static luaretry_call *timed_out_at(luaretry_policy *p, double at, luaretry_decision *d) {
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.error = "timeout";
  luaretry_call *c = begin(p, 0, 0);
  CHECK_CODE(luaretry_call_next(c, d), LUARETRY_OK);
  CHECK_EQ_DBL(d->next_timeout, 1); /* the deadline */
  CHECK_CODE(luaretry_call_wait(c, at), LUARETRY_OK);
  CHECK_CODE(luaretry_call_report(c, &o, d), LUARETRY_OK);
  return c;
}

/* No retry whose rate token comes in the deadline's last millisecond
 * (test_last_millisecond, below, for a wait).  The guards see a
 * virtual call's time as the real time at its begin: the second call's
 * token comes 0.9995 s after the first call began, and its deadline is
 * set 0.3 ms after that, from the clock read around the first begin.  A
 * try whose first begin took 0.5 ms or more (preempted) could place the
 * token outside the last millisecond, and goes again with a new policy
 * (its bucket is spent). */
static void test_token_in_last_millisecond(void) {
  for (int tries = 0; tries < 20; tries++) {
    luaretry_policy *p = load(
      "name = 'paced'\n"
      "deadline = 1\n"
      "attempt_timeout = 10\n"
      "rate = { limit = 1 / 0.9995, burst = 1 }\n");
    luaretry_decision d;
    double before = luaretry_clock_now();
    luaretry_call *first = begin(p, 0, 0);
    double after = luaretry_clock_now();
    if (after - before >= 0.0005) {
      luaretry_call_free(first);
      luaretry_policy_free(p);
      continue;
    }
    CHECK_CODE(luaretry_call_next(first, &d), LUARETRY_OK);
    CHECK_EQ_INT(d.retry, 1);
    CHECK_EQ_DBL(d.wait, 0);
    luaretry_call *c = begin(p, LUARETRY_CALL_DEADLINE, after + 0.9995 + 0.0003);
    CHECK_CODE(luaretry_call_next(c, &d), LUARETRY_OK);
    CHECK_EQ_INT(d.retry, 0);
    CHECK_EQ_STR(luaretry_reason_name(d.reason), "rate_limit");
    luaretry_call_free(c);
    luaretry_call_free(first);
    luaretry_policy_free(p);
    return;
  }
  CHECK(!"20 tries, each first begin preempted for 0.5 ms or more");
}

/* An attempt timed out by the deadline is reported a little before it
 * (libcurl's timeout counts milliseconds and can end up to one early): no
 * retry then, whose attempt would get microseconds.  No attempt starts
 * with less than 1 ms of the deadline left; one with 2 ms does. */
static void test_last_millisecond(void) {
  luaretry_policy *p = load(
    "name = 'tight'\n"
    "deadline = 1\n"
    "attempt_timeout = 10\n"
    "backoff = { initial = 0.0002, max = 0.0002, jitter = 'none' }\n"
    "function is_transient(status) return status == 0 end\n");
  luaretry_decision d;
  /* reported 0.5 ms before the deadline: the retry would start 0.3 ms
   * before it */
  luaretry_call *c = timed_out_at(p, 0.9995, &d);
  CHECK_EQ_INT(d.retry, 0);
  CHECK_EQ_STR(luaretry_reason_name(d.reason), "deadline");
  CHECK_EQ_INT(d.attempt, 1);
  if (CHECK(d.message != NULL))
    CHECK_CONTAINS(d.message, "would start at 1.000 s, less than 1 ms before the deadline");
  luaretry_call_free(c);
  /* reported 2.2 ms before it: the retry goes, with the 2 ms left as its
   * timeout */
  c = timed_out_at(p, 0.9978, &d);
  CHECK_EQ_INT(d.retry, 1);
  CHECK_NEAR(d.wait, 0.0002, 1e-12);
  CHECK_CODE(luaretry_call_wait(c, d.wait), LUARETRY_OK);
  CHECK_CODE(luaretry_call_next(c, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 1);
  CHECK_NEAR(d.next_timeout, 0.002, 1e-9);
  luaretry_call_free(c);
  /* the same retry, asked for 1.5 ms late (0.5 ms before the deadline):
   * not made */
  c = timed_out_at(p, 0.9978, &d);
  CHECK_EQ_INT(d.retry, 1);
  CHECK_CODE(luaretry_call_wait(c, d.wait + 0.0015), LUARETRY_OK);
  CHECK_CODE(luaretry_call_next(c, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 0);
  CHECK_EQ_STR(luaretry_reason_name(d.reason), "deadline");
  if (CHECK(d.message != NULL))
    CHECK_CONTAINS(d.message, "was less than 1 ms away before the attempt was asked for");
  luaretry_call_free(c);
  luaretry_policy_free(p);
  test_token_in_last_millisecond();
  /* a host's deadline under 1 ms (one passed on with little left): no
   * attempt, and the message gives it to the microsecond, not as 0.001 s */
  p = load("name = 'open'\nmax_attempts = 3\nattempt_timeout = 10\n");
  c = begin(p, LUARETRY_CALL_DEADLINE, luaretry_deadline_in(0.0008));
  double dl = luaretry_call_deadline(c);
  CHECK_CODE(luaretry_call_next(c, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 0);
  CHECK_EQ_STR(luaretry_reason_name(d.reason), "deadline");
  const char *shown = d.message ? strstr(d.message, "the deadline (") : NULL;
  double said = -1;
  if (dl == 0) { /* preempted for 0.8 ms before the call began: it had passed */
    if (CHECK(d.message != NULL)) CHECK_CONTAINS(d.message, "before it began");
  } else if (CHECK(shown != NULL) && CHECK(sscanf(shown, "the deadline (%lf s)", &said) == 1)) {
    CHECK_NEAR(said, dl, 1e-6);
  }
  luaretry_call_free(c);
  /* one that passed 0.3 ms before the call began says so, not "0.000 s" */
  double at = luaretry_deadline_in(-0.0003);
  c = begin(p, LUARETRY_CALL_DEADLINE, at);
  double most = luaretry_clock_now() - at; /* how long ago it can have said */
  CHECK_CODE(luaretry_call_next(c, &d), LUARETRY_OK);
  CHECK_EQ_STR(luaretry_reason_name(d.reason), "deadline");
  shown = d.message ? strstr(d.message, "passed ") : NULL;
  if (CHECK(shown != NULL) && CHECK(sscanf(shown, "passed %lf s", &said) == 1)) {
    double rounding = said < 0.01 ? 1e-6 : 5e-4; /* a millisecond's digits past 10 ms */
    CHECK(said >= 0.0003 - rounding && said <= most + rounding);
  }
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

int main(void) {
  test_last_millisecond();
  luaretry_policy *p = load(SVC);
  test_earlier_wins(p);
  test_policy_wins(p);
  test_flag_needed(p);
  test_bad_deadlines(p);
  test_asked_late(p);
  luaretry_policy_free(p);
  test_blocking();
  return check_done();
}
