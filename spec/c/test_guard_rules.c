/* test_guard_rules.c: "One attempt, every guard" (issue 28), through the
 * public step API on the virtual clock, one function per rule; each
 * failed before the guards became one chain (the finding's number in
 * brackets). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "step_support.h"

/* [1] A hedge takes a rate token: none now, no hedge (not a wait).  With
 * one token a second, the attempt took it: no hedge goes within 0.15 s. */
static void hedge_takes_a_rate_token(void) {
  luaretry_policy *p =
    step_load("=rules",
              "max_attempts = 5\ndeadline = 10\nattempt_timeout = 4\n"
              "rate = { limit = 1, burst = 1 }\nhedge = { delay = 0.05, max = 3 }\n");
  luaretry_call *c = step_begin(p, 1);
  luaretry_decision d;
  CHECK_CODE(luaretry_call_next(c, &d), LUARETRY_OK); /* the first attempt's token */
  CHECK_EQ_INT(d.retry, 1);
  CHECK_EQ_DBL(d.wait, 0);
  int id;
  CHECK_CODE(luaretry_call_start(c, &id), LUARETRY_OK);
  luaretry_call_wait(c, 0.05);
  CHECK_CODE(luaretry_call_hedge(c, &STEP_GET, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.hedge, 0);
  CHECK_EQ_INT(d.in_flight, 1);
  CHECK_EQ_DBL(d.wait, 0); /* refused, not told to wait */
  if (CHECK(d.message != NULL)) CHECK_CONTAINS(d.message, "rate limiter");
  CHECK(luaretry_call_hedge_in(c) < 0); /* none more this round */
  luaretry_call_free(c);
  CHECK_EQ_INT((int)step_metrics(p).hedges, 0);
  luaretry_policy_free(p);
  /* with a token free, the hedge goes, and takes it */
  p = step_load("=rules",
                "max_attempts = 5\ndeadline = 10\nattempt_timeout = 4\n"
                "rate = { limit = 1, burst = 2 }\nhedge = { delay = 0.05, max = 3 }\n");
  c = step_begin(p, 1);
  luaretry_call_next(c, &d);
  luaretry_call_start(c, &id);
  luaretry_call_wait(c, 0.05);
  CHECK_CODE(luaretry_call_hedge(c, &STEP_GET, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.hedge, 1);
  luaretry_call_wait(c, 0.05);
  CHECK_CODE(luaretry_call_hedge(c, &STEP_GET, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.hedge, 0); /* the burst of 2 is spent */
  CHECK_EQ_INT(d.in_flight, 2);
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* One call whose hedge answers 200 first. */
static void hedged_call(luaretry_policy *p, uint64_t seed, int *hedged) {
  luaretry_call *c = step_begin(p, seed);
  int id;
  luaretry_decision d;
  luaretry_call_start(c, &id);
  luaretry_call_wait(c, 0.05);
  luaretry_call_hedge(c, &STEP_GET, &d);
  *hedged = d.hedge;
  luaretry_outcome ok = step_status(200);
  luaretry_call_report_attempt(c, d.hedge ? d.attempt : id, &ok, &d);
  luaretry_call_free(c);
}

/* [2] The budget is charged by failures only: six calls whose hedges won
 * leave a 10-token budget whole, and the next 503 is retried.  Hedging
 * has its own bound: of 40 calls that would all hedge, at most
 * hedge.share (0.1) of them plus a reserve of 10 do. */
static void budget_charged_by_failures_only(void) {
  luaretry_policy *p =
    step_load("=rules",
              "max_attempts = 5\ndeadline = 10\nattempt_timeout = 4\n"
              "budget = { max_tokens = 10, token_ratio = 0.1 }\nhedge = { delay = 0.05 }\n");
  int hedged, n = 0;
  for (int i = 0; i < 6; i++) hedged_call(p, (uint64_t)i, &hedged), n += hedged;
  CHECK_EQ_INT(n, 6);
  CHECK_NEAR(step_metrics(p).budget_tokens, 10, 1e-9);
  luaretry_call *c = step_begin(p, 9);
  luaretry_outcome busy = step_status(503);
  luaretry_decision d;
  CHECK_CODE(luaretry_call_report(c, &busy, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 1);
  luaretry_call_free(c);
  luaretry_policy_free(p);

  p = step_load("=rules",
                "max_attempts = 5\ndeadline = 10\nattempt_timeout = 4\nhedge = { delay = 0.05 }\n");
  n = 0;
  for (int i = 0; i < 40; i++) hedged_call(p, (uint64_t)i, &hedged), n += hedged;
  CHECK(n >= 10);
  CHECK(n <= 10 + 4); /* the reserve, and 0.1 of 40 calls */
  CHECK_EQ_INT((int)step_metrics(p).hedges, n);
  luaretry_policy_free(p);
  /* hedge.share = 1: every call may hedge */
  p = step_load("=rules",
                "max_attempts = 5\ndeadline = 10\nattempt_timeout = 4\n"
                "hedge = { delay = 0.05, share = 1 }\n");
  n = 0;
  for (int i = 0; i < 40; i++) hedged_call(p, (uint64_t)i, &hedged), n += hedged;
  CHECK_EQ_INT(n, 40);
  luaretry_policy_free(p);
}

/* A call whose one attempt gets `code`; the decision. */
static luaretry_decision one(luaretry_policy *p, int code, uint64_t seed) {
  luaretry_call *c = step_begin(p, seed);
  luaretry_outcome o = step_status(code);
  luaretry_decision d;
  memset(&d, 0, sizeof d);
  if (luaretry_call_cancelled(c) == 0) luaretry_call_report(c, &o, &d);
  luaretry_call_free(c);
  return d;
}

/* [3] A throttling answer is neutral to the breaker: 20 429s in a row
 * never open it, a 429 between two 503s does not reset their count, and a
 * 429 answering a half-open probe does not close it. */
static void throttling_is_neutral_to_the_breaker(void) {
  luaretry_policy *p = step_load("=rules",
                                 "max_attempts = 1\ndeadline = 10\nattempt_timeout = 4\n"
                                 "breaker = { failures = 3, open_seconds = 0.2, probes = 1 }\n");
  for (int i = 0; i < 20; i++) one(p, 429, (uint64_t)i);
  CHECK_EQ_INT(step_metrics(p).breaker, LUARETRY_BREAKER_CLOSED);
  one(p, 503, 1);
  one(p, 503, 2);
  one(p, 429, 3); /* neither a failure nor a reset */
  one(p, 503, 4);
  CHECK_EQ_INT(step_metrics(p).breaker, LUARETRY_BREAKER_OPEN);
  /* half-open after open_seconds (the guards' clock is real time) */
  luaretry_call *w = step_begin(p, 5);
  for (int i = 0; i < 200 && step_metrics(p).breaker == LUARETRY_BREAKER_OPEN; i++) {
    luaretry_call *c = NULL;
    luaretry_call_options o;
    luaretry_call_options_init(&o);
    o.flags = LUARETRY_CALL_VIRTUAL_TIME;
    struct timespec ts = { 0, 10 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    luaretry_call_begin(p, &o, &c);
    luaretry_decision d;
    luaretry_outcome thr = step_status(429);
    int idle;
    if (luaretry_call_start(c, &idle) == LUARETRY_OK) {
      CHECK_CODE(luaretry_call_report(c, &thr, &d), LUARETRY_OK); /* the probe: a 429 */
      CHECK_EQ_INT(step_metrics(p).breaker, LUARETRY_BREAKER_HALF_OPEN);
    }
    luaretry_call_free(c);
  }
  CHECK_EQ_INT(step_metrics(p).breaker, LUARETRY_BREAKER_HALF_OPEN);
  /* its permit was handed back: the next probe's 200 closes it */
  luaretry_decision d = one(p, 200, 6);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_SUCCESS);
  CHECK_EQ_INT(step_metrics(p).breaker, LUARETRY_BREAKER_CLOSED);
  luaretry_call_free(w);
  luaretry_policy_free(p);
}

/* [4] A slow call is the attempt's own time: hedges sent at 0.09 s that
 * answer 0.03 s later are not slow under slow_call = 0.1 s, though their
 * round began 0.12 s before. */
static void slow_call_is_the_attempts_own_time(void) {
  luaretry_policy *p = step_load(
    "=rules",
    "max_attempts = 5\ndeadline = 10\nattempt_timeout = 4\n"
    "hedge = { delay = 0.09 }\n"
    "breaker = { failures = 100, slow_call = { seconds = 0.1, rate = 0.5 }, window = 4 }\n");
  for (int i = 0; i < 8; i++) {
    luaretry_call *c = step_begin(p, (uint64_t)i);
    int id;
    luaretry_decision d;
    luaretry_call_start(c, &id);
    luaretry_call_wait(c, 0.09);
    CHECK_CODE(luaretry_call_hedge(c, &STEP_GET, &d), LUARETRY_OK);
    CHECK_EQ_INT(d.hedge, 1);
    luaretry_call_wait(c, 0.03);
    luaretry_outcome ok = step_status(200);
    CHECK_CODE(luaretry_call_report_attempt(c, d.attempt, &ok, &d), LUARETRY_OK);
    CHECK_EQ_INT(d.reason, LUARETRY_REASON_SUCCESS);
    luaretry_call_free(c);
  }
  CHECK_EQ_INT(step_metrics(p).breaker, LUARETRY_BREAKER_CLOSED);
  luaretry_policy_free(p);
}

/* [5] Every attempt in half-open takes a permit: with one probe, the
 * probe call's hedge is refused. */
static void every_half_open_attempt_takes_a_permit(void) {
  luaretry_policy *p = step_load("=rules",
                                 "max_attempts = 5\ndeadline = 10\nattempt_timeout = 4\n"
                                 "hedge = { delay = 0.05, max = 3 }\n"
                                 "breaker = { failures = 1, open_seconds = 0.5, probes = 1 }\n");
  one(p, 503, 1);
  CHECK_EQ_INT(step_metrics(p).breaker, LUARETRY_BREAKER_OPEN);
  /* past open_seconds; the hedge 0.05 s later is well within the next
   * open_seconds, after which a probe that never told gets a new permit */
  struct timespec ts = { 0, 600 * 1000 * 1000 };
  nanosleep(&ts, NULL);
  luaretry_call *c = step_begin(p, 2); /* the probe: the one permit */
  int id;
  CHECK_CODE(luaretry_call_start(c, &id), LUARETRY_OK);
  CHECK_EQ_INT(step_metrics(p).breaker, LUARETRY_BREAKER_HALF_OPEN);
  luaretry_call_wait(c, 0.05);
  luaretry_decision d;
  CHECK_CODE(luaretry_call_hedge(c, &STEP_GET, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.hedge, 0);
  if (CHECK(d.message != NULL)) CHECK_CONTAINS(d.message, "circuit");
  luaretry_outcome ok = step_status(200);
  CHECK_CODE(luaretry_call_report(c, &ok, &d), LUARETRY_OK);
  CHECK_EQ_INT(step_metrics(p).breaker, LUARETRY_BREAKER_CLOSED);
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* [6] A request is counted when it is sent: a retry the deadline stops
 * is not a request to admission, so 200 rounds of (a success, a 503 whose
 * retry would pass the deadline) keep requests at twice the accepts and
 * admission (k = 2) never refuses.  And a hedge is a request: with k =
 * 1.5, calls whose hedges win are refused now and then. */
static void a_request_is_counted_when_sent(void) {
  luaretry_policy *p = step_load("=rules",
                                 "max_attempts = 3\ndeadline = 0.5\nattempt_timeout = 0.4\n"
                                 "backoff = { kind = 'constant', initial = 1, jitter = 'none' }\n"
                                 "throttle = { k = 2, window = 600 }\n");
  int deadlines = 0;
  for (int i = 0; i < 200; i++) {
    CHECK_EQ_INT(one(p, 200, (uint64_t)i).reason, LUARETRY_REASON_SUCCESS);
    deadlines += one(p, 503, (uint64_t)i + 1000).reason == LUARETRY_REASON_DEADLINE;
  }
  CHECK_EQ_INT(deadlines, 200);
  CHECK_EQ_INT((int)step_metrics(p).throttle_refusals, 0);
  luaretry_policy_free(p);

  p = step_load("=rules",
                "max_attempts = 5\ndeadline = 10\nattempt_timeout = 4\n"
                "hedge = { delay = 0.05, share = 1 }\nthrottle = { k = 1.5, window = 600 }\n");
  int hedged;
  for (int i = 0; i < 200; i++) hedged_call(p, (uint64_t)i, &hedged);
  CHECK(step_metrics(p).throttle_refusals > 0);
  luaretry_policy_free(p);
}

/* [7] A percentile hedge delay learns from cancelled attempts too: 25
 * calls answered after 0.1 s and 25 whose attempt was cancelled after
 * 0.5 s give a p60 of 0.5 s (the cancelled time as a lower bound). */
static void percentile_learns_cancelled_attempts(void) {
  luaretry_policy *p = step_load("=rules",
                                 "max_attempts = 5\ndeadline = 10\nattempt_timeout = 4\n"
                                 "hedge = { delay = 'p60', floor = 0.01, ceiling = 1 }\n");
  int id;
  luaretry_decision d;
  for (int i = 0; i < 50; i++) {
    luaretry_call *c = step_begin(p, (uint64_t)i);
    luaretry_call_start(c, &id);
    if (i % 2) {
      luaretry_call_wait(c, 0.1);
      luaretry_outcome ok = step_status(200);
      luaretry_call_report(c, &ok, &d);
    } else {
      luaretry_call_wait(c, 0.5);
      luaretry_call_cancel(c);
      luaretry_call_stop_cancelled(c, &d);
      CHECK_EQ_INT(d.reason, LUARETRY_REASON_CANCELLED);
    }
    luaretry_call_free(c);
  }
  luaretry_call *c = step_begin(p, 99);
  luaretry_call_start(c, &id);
  CHECK_NEAR(luaretry_call_hedge_in(c), 0.5, 1e-3);
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* When a later guard refuses, what earlier ones gave is handed back: a
 * probe call's hedge takes the second of two half-open permits, then the
 * rate limiter (its one token spent) refuses it; the permit comes back,
 * and a second call takes it. */
static void a_later_refusal_hands_back(void) {
  luaretry_policy *p =
    step_load("=rules",
              "max_attempts = 5\ndeadline = 10\nattempt_timeout = 4\n"
              "rate = { limit = 1, burst = 1 }\nhedge = { delay = 0.05, max = 3, share = 1 }\n"
              "breaker = { failures = 1, open_seconds = 0.5, probes = 2 }\n");
  one(p, 503, 1);
  struct timespec ts = { 0, 600 * 1000 * 1000 };
  nanosleep(&ts, NULL);
  luaretry_call *c = step_begin(p, 2); /* permit 1 */
  luaretry_decision d;
  luaretry_call_next(c, &d); /* the one token */
  int id;
  CHECK_CODE(luaretry_call_start(c, &id), LUARETRY_OK);
  luaretry_call_wait(c, 0.05);
  CHECK_CODE(luaretry_call_hedge(c, &STEP_GET, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.hedge, 0);
  if (CHECK(d.message != NULL)) CHECK_CONTAINS(d.message, "rate limiter");
  luaretry_call *second = step_begin(p, 3); /* permit 2, handed back by the hedge */
  CHECK_CODE(luaretry_call_start(second, &id), LUARETRY_OK);
  luaretry_call *third = step_begin(p, 4); /* none left */
  CHECK_CODE(luaretry_call_start(third, &id), LUARETRY_E_STATE);
  luaretry_call_free(third);
  luaretry_call_free(second);
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

int main(void) {
  hedge_takes_a_rate_token();
  budget_charged_by_failures_only();
  throttling_is_neutral_to_the_breaker();
  slow_call_is_the_attempts_own_time();
  every_half_open_attempt_takes_a_permit();
  a_request_is_counted_when_sent();
  percentile_learns_cancelled_attempts();
  a_later_refusal_hands_back();
  return check_done();
}
