/* test_step_hedge.c: the step API's hedging, as luaretry.h documents it,
 * on the virtual clock: start, hedge_in, hedge, report_attempt; a hedge
 * that fails while the original goes on, a hedge that wins, and each rule
 * that refuses one (not idempotent, max_attempts, the budget, the breaker,
 * the deadline), with the counters. */
#include <stdio.h>
#include <string.h>

#include "step_support.h"

static const char HEDGED[] =
  "max_attempts = 5\ndeadline = 10\nattempt_timeout = 4\n"
  "hedge = { delay = 0.05, max = 1 }\n";

/* A hedge fails while the original goes on and wins; then one that wins. */
static void failed_then_won(void) {
  luaretry_policy *p = step_load("=hedge", HEDGED);
  luaretry_call *c = step_begin(p, 7);
  CHECK(luaretry_call_hedge_in(c) < 0); /* nothing in flight */
  int id = 0;
  CHECK_CODE(luaretry_call_start(c, &id), LUARETRY_OK);
  CHECK_EQ_INT(id, 1);
  CHECK_NEAR(luaretry_call_hedge_in(c), 0.05, 1e-9);
  CHECK_CODE(luaretry_call_start(c, &id), LUARETRY_E_STATE); /* a second is a hedge */
  luaretry_call_wait(c, 0.05);
  CHECK_EQ_DBL(luaretry_call_hedge_in(c), 0);
  luaretry_decision d;
  CHECK_CODE(luaretry_call_hedge(c, &STEP_GET, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 1);
  CHECK_EQ_INT(d.hedge, 1);
  CHECK_EQ_INT(d.attempt, 2);
  CHECK_EQ_INT(d.in_flight, 2);
  CHECK_NEAR(d.next_timeout, 4, 1e-9);
  CHECK(luaretry_call_hedge_in(c) < 0); /* max = 1 in flight beside it */
  luaretry_outcome busy = step_status(503), ok = step_status(200);
  CHECK_CODE(luaretry_call_report_attempt(c, 7, &ok, &d), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_call_report_attempt(c, 2, &busy, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 0);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_NONE);
  CHECK_EQ_INT(d.hedge, 1);
  CHECK_EQ_INT(d.attempt, 2);
  CHECK_EQ_INT(d.in_flight, 1);
  CHECK(luaretry_call_hedge_in(c) < 0); /* a failure sends no more this round */
  CHECK_CODE(luaretry_call_report_attempt(c, 1, &ok, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_SUCCESS);
  CHECK_EQ_INT(d.hedge, 0);
  CHECK_EQ_INT(d.in_flight, 0);
  luaretry_call_free(c);

  c = step_begin(p, 7);
  CHECK_CODE(luaretry_call_start(c, &id), LUARETRY_OK);
  luaretry_call_wait(c, 0.05);
  CHECK_CODE(luaretry_call_hedge(c, &STEP_GET, &d), LUARETRY_OK);
  CHECK_CODE(luaretry_call_report_attempt(c, 2, &ok, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_SUCCESS);
  CHECK_EQ_INT(d.hedge, 1);
  CHECK_EQ_INT(d.in_flight, 1); /* the host cancels it, never reports it */
  CHECK_CODE(luaretry_call_report_attempt(c, 1, &ok, &d), LUARETRY_E_STATE);
  luaretry_call_free(c);

  luaretry_metrics m;
  luaretry_policy_metrics(p, &m);
  CHECK_EQ_INT((int)m.hedges, 2);
  CHECK_EQ_INT((int)m.hedges_won, 1);
  CHECK_EQ_INT((int)m.hedges_cancelled, 1);
  CHECK_EQ_INT((int)m.attempts, 4);
  CHECK_EQ_INT((int)m.successes, 2);
  luaretry_policy_free(p);
}

/* Every attempt in flight fails: then, and only then, a retry. */
static void all_fail_then_retry(void) {
  luaretry_policy *p = step_load("=hedge", HEDGED);
  luaretry_call *c = step_begin(p, 7);
  int id;
  luaretry_decision d;
  luaretry_outcome busy = step_status(503);
  CHECK_CODE(luaretry_call_start(c, &id), LUARETRY_OK);
  luaretry_call_wait(c, 0.05);
  CHECK_CODE(luaretry_call_hedge(c, &STEP_GET, &d), LUARETRY_OK);
  CHECK_CODE(luaretry_call_report_attempt(c, 1, &busy, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_NONE);
  CHECK_EQ_INT(d.retry, 0);
  CHECK_CODE(luaretry_call_report_attempt(c, 2, &busy, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 1);
  CHECK(d.wait > 0);
  luaretry_call_wait(c, d.wait);
  CHECK_CODE(luaretry_call_next(c, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 1);
  CHECK_CODE(luaretry_call_start(c, &id), LUARETRY_OK);
  CHECK_EQ_INT(id, 3);
  CHECK_NEAR(luaretry_call_hedge_in(c), 0.05, 1e-9); /* a new round */
  /* a plain report takes the attempt in flight */
  luaretry_outcome ok = step_status(200);
  CHECK_CODE(luaretry_call_report(c, &ok, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.attempt, 3);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_SUCCESS);
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* A refusal: d.retry 0, reason NONE, the message; no more this round. */
static void refused(luaretry_policy *p, const luaretry_request *r, double wait, const char *why) {
  luaretry_call *c = step_begin(p, 7);
  int id;
  luaretry_decision d;
  CHECK_CODE(luaretry_call_start(c, &id), LUARETRY_OK);
  luaretry_call_wait(c, wait);
  CHECK_CODE(luaretry_call_hedge(c, r, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 0);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_NONE);
  CHECK_EQ_INT(d.in_flight, 1);
  if (CHECK(d.message != NULL)) CHECK_CONTAINS(d.message, why);
  CHECK(luaretry_call_hedge_in(c) < 0);
  luaretry_call_free(c);
}

static void refusals(void) {
  luaretry_policy *p = step_load("=hedge", HEDGED);
  refused(p, &STEP_POST, 0.05, "not idempotent");
  luaretry_policy_free(p);
  /* max_attempts = 3: the first round's two attempts fail, the retry is
   * the third, and its hedge would be a fourth */
  p = step_load("=hedge", "max_attempts = 3\nattempt_timeout = 4\nhedge = { delay = 0.05 }\n");
  {
    luaretry_call *c3 = step_begin(p, 7);
    int id3;
    luaretry_decision d3;
    luaretry_outcome busy3 = step_status(503);
    luaretry_call_start(c3, &id3);
    luaretry_call_wait(c3, 0.05);
    CHECK_CODE(luaretry_call_hedge(c3, &STEP_GET, &d3), LUARETRY_OK);
    CHECK_EQ_INT(d3.hedge, 1);
    luaretry_call_report_attempt(c3, 1, &busy3, &d3);
    luaretry_call_report_attempt(c3, 2, &busy3, &d3);
    CHECK_EQ_INT(d3.retry, 1);
    luaretry_call_wait(c3, d3.wait);
    luaretry_call_next(c3, &d3);
    CHECK_CODE(luaretry_call_start(c3, &id3), LUARETRY_OK);
    CHECK_EQ_INT(id3, 3);
    luaretry_call_wait(c3, 0.05);
    CHECK_CODE(luaretry_call_hedge(c3, &STEP_GET, &d3), LUARETRY_OK);
    CHECK_EQ_INT(d3.retry, 0);
    if (CHECK(d3.message != NULL)) CHECK_CONTAINS(d3.message, "max_attempts");
    luaretry_call_free(c3);
  }
  luaretry_policy_free(p);
  p = step_load("=hedge", "max_attempts = 5\ndeadline = 0.1\nhedge = { delay = 0.05 }\n");
  refused(p, &STEP_GET, 0.2, "deadline");
  refused(p, &STEP_GET, 0.0995, "deadline"); /* no attempt in its last millisecond */
  luaretry_policy_free(p);
  /* 2 tokens: a hedge goes (2 > half) and pays nothing as it goes (gRPC
   * A6: failures charge the budget); a failure leaves 1: no hedge then */
  p = step_load("=hedge",
                "max_attempts = 5\nattempt_timeout = 4\nhedge = { delay = 0.05 }\n"
                "budget = { max_tokens = 2, token_ratio = 0.1 }\n");
  luaretry_call *c = step_begin(p, 7);
  int id;
  luaretry_decision d;
  luaretry_call_start(c, &id);
  luaretry_call_wait(c, 0.05);
  CHECK_CODE(luaretry_call_hedge(c, &STEP_GET, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 1);
  luaretry_call_free(c);
  luaretry_metrics m;
  luaretry_policy_metrics(p, &m);
  CHECK_NEAR(m.budget_tokens, 2, 1e-9);
  c = step_begin(p, 7);
  luaretry_outcome failed = step_status(503);
  luaretry_call_report(c, &failed, &d);
  luaretry_call_free(c);
  luaretry_policy_metrics(p, &m);
  CHECK_NEAR(m.budget_tokens, 1, 1e-9);
  refused(p, &STEP_GET, 0.05, "budget");
  luaretry_policy_free(p);
  /* the breaker open: a 503 opened it (failures = 1) */
  p = step_load("=hedge",
                "max_attempts = 5\nattempt_timeout = 4\nhedge = { delay = 0.05 }\n"
                "breaker = { failures = 1, open_seconds = 60 }\n");
  c = step_begin(p, 7);
  luaretry_outcome busy = step_status(503);
  luaretry_call_report(c, &busy, &d);
  luaretry_call_free(c);
  luaretry_call_options o;
  luaretry_call_options_init(&o);
  c = NULL;
  luaretry_call_begin(p, &o, &c); /* refused at begin: no attempt, no hedge */
  CHECK_CODE(luaretry_call_start(c, &id), LUARETRY_E_STATE);
  CHECK(luaretry_call_hedge_in(c) < 0);
  luaretry_call_free(c);
  luaretry_policy_free(p);
  /* a call that asks for none */
  p = step_load("=hedge", HEDGED);
  luaretry_call_options_init(&o);
  o.flags = LUARETRY_CALL_NO_HEDGE | LUARETRY_CALL_VIRTUAL_TIME;
  c = NULL;
  CHECK_CODE(luaretry_call_begin(p, &o, &c), LUARETRY_OK);
  CHECK_CODE(luaretry_call_start(c, &id), LUARETRY_OK);
  luaretry_call_wait(c, 1);
  CHECK(luaretry_call_hedge_in(c) < 0);
  CHECK_CODE(luaretry_call_hedge(c, &STEP_GET, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 0);
  luaretry_call_free(c);
  luaretry_policy_free(p);
  /* no hedge in the policy */
  p = step_load("=hedge", "max_attempts = 5\nattempt_timeout = 4\n");
  c = step_begin(p, 7);
  CHECK_CODE(luaretry_call_start(c, &id), LUARETRY_OK);
  CHECK(luaretry_call_hedge_in(c) < 0);
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* info.hedge reaches the script. */
static void info_hedge(void) {
  luaretry_policy *p =
    step_load("=hedge",
              "max_attempts = 5\nattempt_timeout = 4\nhedge = { delay = 0.05 }\n"
              "function is_success(status, body, info) return not info.hedge end\n"
              "function is_transient(status, body, info) return false end\n");
  luaretry_call *c = step_begin(p, 7);
  int id;
  luaretry_decision d;
  luaretry_outcome ok = step_status(200);
  luaretry_call_start(c, &id);
  luaretry_call_wait(c, 0.05);
  luaretry_call_hedge(c, &STEP_GET, &d);
  CHECK_CODE(luaretry_call_report_attempt(c, 2, &ok, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_FINAL); /* not a success: a hedge */
  CHECK_EQ_INT(d.in_flight, 1);
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* delay = "p50": the ceiling until 20 attempts are known, then their
 * median, within floor and ceiling. */
static void percentile(void) {
  luaretry_policy *p = step_load("=hedge",
                                 "max_attempts = 5\nattempt_timeout = 4\n"
                                 "hedge = { delay = 'p50', floor = 0.01, ceiling = 0.5 }\n");
  luaretry_decision d;
  luaretry_outcome ok = step_status(200);
  int id;
  for (int i = 0; i < 30; i++) {
    luaretry_call *c = step_begin(p, 7);
    luaretry_call_start(c, &id);
    if (i == 0) CHECK_NEAR(luaretry_call_hedge_in(c), 0.5, 1e-9); /* nothing known */
    luaretry_call_wait(c, i % 2 ? 0.2 : 0.3);
    CHECK_CODE(luaretry_call_report_attempt(c, id, &ok, &d), LUARETRY_OK);
    luaretry_call_free(c);
  }
  luaretry_call *c = step_begin(p, 7);
  luaretry_call_start(c, &id);
  CHECK_NEAR(luaretry_call_hedge_in(c), 0.2, 1e-3); /* 15 at 0.2 s, 15 at 0.3 s */
  luaretry_call_free(c);
  CHECK_CODE(luaretry_policy_set(p, "hedge.ceiling", "0.1"), LUARETRY_OK);
  c = step_begin(p, 7);
  luaretry_call_start(c, &id);
  CHECK_NEAR(luaretry_call_hedge_in(c), 0.1, 1e-9); /* the ceiling */
  luaretry_call_free(c);
  char buf[32];
  CHECK_CODE(luaretry_policy_get(p, "hedge.delay", buf, sizeof buf), LUARETRY_OK);
  CHECK_EQ_STR(buf, "p50");
  luaretry_policy_free(p);
}

/* LUARETRY_CALL_WORKFLOW_REQUEST: a transient answer ends the round (after the
 * hedge in flight answers too), no retry; the round is no call to the
 * metrics and the breaker never hears of it, but its hedge pays a token. */
static void one_round(void) {
  luaretry_policy *p = step_load("=hedge",
                                 "max_attempts = 5\ndeadline = 10\nattempt_timeout = 4\n"
                                 "hedge = { delay = 0.05, max = 1 }\n"
                                 "budget = { max_tokens = 10, token_ratio = 0.1 }\n"
                                 "breaker = { failures = 1, open_seconds = 60 }\n");
  luaretry_call_options o;
  step_options(&o, 7);
  o.flags |= LUARETRY_CALL_WORKFLOW_REQUEST;
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, &o, &c), LUARETRY_OK);
  int id;
  CHECK_CODE(luaretry_call_start(c, &id), LUARETRY_OK);
  luaretry_call_wait(c, 0.05);
  luaretry_decision d;
  CHECK_CODE(luaretry_call_hedge(c, &STEP_GET, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.hedge, 1);
  luaretry_outcome busy = step_status(503);
  CHECK_CODE(luaretry_call_report_attempt(c, 1, &busy, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 0);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_NONE); /* the hedge is still out */
  CHECK_EQ_INT(d.in_flight, 1);
  CHECK_CODE(luaretry_call_report_attempt(c, 2, &busy, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 0);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_FINAL);
  CHECK(d.message && strstr(d.message, "round"));
  luaretry_call_free(c);
  luaretry_metrics m;
  CHECK_CODE(luaretry_policy_metrics(p, &m), LUARETRY_OK);
  CHECK_EQ_INT((int)m.calls, 0);
  CHECK_EQ_INT((int)m.finals, 0);
  CHECK_EQ_INT((int)m.retries, 0);
  CHECK_EQ_INT((int)m.hedges, 1);
  CHECK_EQ_INT(m.breaker, LUARETRY_BREAKER_CLOSED); /* two 503s, failures = 1 */
  CHECK_NEAR(m.budget_tokens, 10, 1e-9);            /* a hedge pays nothing as it goes */
  /* An open circuit refuses a call at once, and a hedge; not a round's
   * start, which its enclosing call was admitted for. */
  luaretry_call *plain = step_begin(p, 7);
  luaretry_outcome again = step_status(503);
  CHECK_CODE(luaretry_call_report(plain, &again, &d), LUARETRY_OK);
  luaretry_call_free(plain);
  CHECK_CODE(luaretry_policy_metrics(p, &m), LUARETRY_OK);
  CHECK_EQ_INT(m.breaker, LUARETRY_BREAKER_OPEN);
  plain = step_begin(p, 7);
  CHECK_CODE(luaretry_call_start(plain, &id), LUARETRY_E_STATE); /* refused at begin */
  luaretry_call_free(plain);
  CHECK_CODE(luaretry_call_begin(p, &o, &c), LUARETRY_OK);
  CHECK_CODE(luaretry_call_start(c, &id), LUARETRY_OK);
  luaretry_call_wait(c, 0.05);
  CHECK_CODE(luaretry_call_hedge(c, &STEP_GET, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.hedge, 0); /* no hedge through an open circuit */
  CHECK(d.message && strstr(d.message, "circuit"));
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

int main(void) {
  failed_then_won();
  one_round();
  all_fail_then_retry();
  refusals();
  info_hedge();
  percentile();
  return check_done();
}
