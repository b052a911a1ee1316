/* test_simulate_latency.c: luaretry_simulate_latency as luaretry.h
 * documents it, with fixed seeds: the hedge cuts the tail below the slow
 * latency at a few percent more requests, without it the tail is the slow
 * latency at one request a call; the same options give the same figures,
 * attempts longer than their timeout time out and are retried, each run
 * has fresh guards and the policy's own counters stay untouched, and bad
 * options, a missing load and a script error are refused with a code and
 * a message. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "luaretry_tool.h"
#include "step_support.h"

static const char HEDGED[] =
  "max_attempts = 5\ndeadline = 10\nattempt_timeout = 4\n"
  "hedge = { delay = 0.05, max = 1 }\n";

/* 1000 calls, 10 ms, and 1 s for 5% of the attempts. */
static luaretry_latency_options tail(int no_hedge) {
  luaretry_latency_options o;
  luaretry_latency_options_init(&o);
  o.base = 0.01;
  o.slow = 1;
  o.fraction = 0.05;
  o.seed = 1;
  o.no_hedge = no_hedge;
  return o;
}

static void hedge_cuts_the_tail(void) {
  luaretry_policy *p = step_load("=latency", HEDGED);
  luaretry_latency_options o = tail(0);
  luaretry_latency_result with, again, without;
  CHECK_CODE(luaretry_simulate_latency(p, &o, &with), LUARETRY_OK);
  CHECK_EQ_INT(with.calls, 1000);
  CHECK_NEAR(with.p50, 0.01, 1e-9);
  CHECK(with.p99 < 0.1);                        /* the hedge (after 50 ms) answers in 10 ms */
  CHECK(with.p999 <= 1 + 1e-9);                 /* a slow hedge too: never past the slow one */
  CHECK(with.hedges > 20 && with.hedges < 100); /* about the 5% slow */
  CHECK(with.hedges_won > 0 && with.hedges_won <= with.hedges);
  CHECK_EQ_INT(with.requests, with.calls + with.hedges);
  CHECK(with.requests_per_call > 1.02 && with.requests_per_call < 1.1);
  CHECK_NEAR(with.requests_per_call, (double)with.requests / 1000, 1e-12);

  CHECK_CODE(luaretry_simulate_latency(p, &o, &again), LUARETRY_OK); /* fixed seed */
  CHECK_EQ_DBL(again.p99, with.p99);
  CHECK_EQ_DBL(again.p999, with.p999);
  CHECK_EQ_INT(again.requests, with.requests);
  CHECK_EQ_INT(again.hedges_won, with.hedges_won);

  o = tail(1);
  CHECK_CODE(luaretry_simulate_latency(p, &o, &without), LUARETRY_OK);
  CHECK_NEAR(without.p50, 0.01, 1e-9);
  CHECK(without.p99 >= 1 - 1e-9); /* 5% slow: the 99th is one of them */
  CHECK_EQ_INT(without.requests, 1000);
  CHECK_EQ_DBL(without.requests_per_call, 1);
  CHECK_EQ_INT(without.hedges, 0);
  CHECK_EQ_INT(without.hedges_won, 0);

  luaretry_metrics m;
  CHECK_CODE(luaretry_policy_metrics(p, &m), LUARETRY_OK);
  CHECK_EQ_INT(m.calls, 0); /* guards and counters of their own */
  CHECK_EQ_INT(m.hedges, 0);
  luaretry_policy_free(p);
}

/* Every attempt slower than attempt_timeout: each call times out three
 * times, the backoff between. */
static void timeouts_are_retried(void) {
  luaretry_policy *p =
    step_load("=latency",
              "max_attempts = 3\ndeadline = 60\nattempt_timeout = 0.5\n"
              "backoff = { kind = 'constant', initial = 0.25, jitter = 'none' }\n");
  luaretry_latency_options o;
  luaretry_latency_options_init(&o);
  o.calls = 50;
  o.base = 2;
  luaretry_latency_result r;
  CHECK_CODE(luaretry_simulate_latency(p, &o, &r), LUARETRY_OK);
  CHECK_EQ_INT(r.calls, 50);
  CHECK_EQ_INT(r.requests, 150);
  CHECK_EQ_DBL(r.requests_per_call, 3);
  CHECK_NEAR(r.p50, 3 * 0.5 + 2 * 0.25, 1e-9);
  CHECK_NEAR(r.p999, r.p50, 1e-9);
  luaretry_policy_free(p);
}

/* A budget spent by one run is not the next one's: each has its own. */
static void fresh_guards_each_run(void) {
  luaretry_policy *p =
    step_load("=latency",
              "max_attempts = 3\ndeadline = 60\nattempt_timeout = 0.5\n"
              "backoff = { kind = 'constant', initial = 0.25, jitter = 'none' }\n"
              "budget = { max_tokens = 4, token_ratio = 0.1 }\n");
  luaretry_latency_options o;
  luaretry_latency_options_init(&o);
  o.calls = 20;
  o.base = 2;
  luaretry_latency_result first, second;
  CHECK_CODE(luaretry_simulate_latency(p, &o, &first), LUARETRY_OK);
  CHECK(first.requests > 20 && first.requests < 60); /* the budget refused most retries */
  CHECK_CODE(luaretry_simulate_latency(p, &o, &second), LUARETRY_OK);
  CHECK_EQ_INT(second.requests, first.requests);
  CHECK_EQ_DBL(second.p99, first.p99);
  luaretry_policy_free(p);
}

static void refusals(void) {
  luaretry_policy *p = step_load("=latency", HEDGED);
  luaretry_latency_result r;
  struct {
    long calls;
    double base, slow, fraction;
    const char *named;
  } bad[] = {
    { 0, 0.01, 1, 0.05, "calls 0" },        { 1000001, 0.01, 1, 0.05, "calls 1000001" },
    { 10, -1, 1, 0.05, "base -1" },         { 10, 0.01, 3601, 0.05, "slow 3601" },
    { 10, 0.01, NAN, 0.05, "slow nan" },    { 10, 0.01, 1, 1.5, "fraction 1.5" },
    { 10, 0.01, 1, -0.1, "fraction -0.1" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    luaretry_latency_options o = tail(0);
    o.calls = bad[i].calls;
    o.base = bad[i].base;
    o.slow = bad[i].slow;
    o.fraction = bad[i].fraction;
    CHECK_CODE(luaretry_simulate_latency(p, &o, &r), LUARETRY_E_ARG);
    CHECK_CONTAINS(luaretry_policy_errmsg(p), bad[i].named);
  }
  luaretry_latency_options o = tail(0);
  CHECK_CODE(luaretry_simulate_latency(p, NULL, &r), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_simulate_latency(p, &o, NULL), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_simulate_latency(NULL, &o, &r), LUARETRY_E_ARG);
  luaretry_policy_free(p);

  luaretry_policy *none = NULL;
  luaretry_policy_new(&none);
  CHECK_CODE(luaretry_simulate_latency(none, &o, &r), LUARETRY_E_STATE);
  luaretry_policy_free(none);

  /* is_idempotent fails when the first hedge is due */
  luaretry_policy *broken = step_load("=latency",
                                      "max_attempts = 5\ndeadline = 10\n"
                                      "hedge = { delay = 0.05 }\n"
                                      "function is_idempotent(r) error('no idea') end\n");
  CHECK_CODE(luaretry_simulate_latency(broken, &o, &r), LUARETRY_E_POLICY);
  CHECK_CONTAINS(luaretry_policy_errmsg(broken), "no idea");
  luaretry_policy_free(broken);
}

int main(void) {
  hedge_cuts_the_tail();
  timeouts_are_retried();
  fresh_guards_each_run();
  refusals();
  return check_done();
}
