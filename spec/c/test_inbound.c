/* test_inbound.c: one retry layer and one deadline across services, as a
 * host in the middle of a chain sees them: luaretry_call_options_inbound()
 * reads what its own request carried (only ever shortening the deadline
 * and lowering the retries; garbage ignored and told), the call keeps to
 * the caller's retries but for failures no connection was made for, and
 * luaretry_call_prepare() adds the propagate headers to each attempt.
 * Virtual clock, fixed seed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "step_support.h"

/* 4 attempts, waits 1 s, attempt_timeout 4, deadline 30; propagate on with
 * the default names */
static const char MID[] =
  "name = \"mid\"\n"
  "max_attempts = 4\n"
  "deadline = 30\n"
  "attempt_timeout = 4\n"
  "backoff = { kind = \"constant\", initial = 1, jitter = \"none\" }\n"
  "propagate = {}\n";

static luaretry_code inbound(luaretry_policy *p, luaretry_call_options *o, const char *n1,
                             const char *v1, const char *n2, const char *v2) {
  luaretry_header h[2] = { { n1, v1 }, { n2, v2 } };
  return luaretry_call_options_inbound(p, h, n2 ? 2 : 1, o);
}

/* Repeated headers: the smallest valid value; names in any case. */
static void test_repeated(luaretry_policy *p) {
  luaretry_call_options o;
  step_options(&o, 7);
  CHECK_CODE(inbound(p, &o, "luaretry-retries", "3", "LUARETRY-RETRIES", " 1 "), LUARETRY_OK);
  CHECK(o.flags & LUARETRY_CALL_RETRIES);
  CHECK_EQ_INT(o.retries, 1);
  double before = luaretry_clock_now();
  CHECK_CODE(inbound(p, &o, "Luaretry-Deadline-Ms", "9000", "luaretry-deadline-ms", "2500"),
             LUARETRY_OK);
  CHECK(o.flags & LUARETRY_CALL_DEADLINE);
  CHECK(o.deadline >= before + 2.5 && o.deadline <= luaretry_clock_now() + 2.5);
}

/* Negative, not a number, NaN, huge, empty: ignored and told (E_ARG),
 * the valid one beside them still applies. */
static void test_garbage(luaretry_policy *p) {
  static const char *bad[] = { "-1",  "nan", "NaN",           "1e3",   "0x10",
                               "1.5", "",    "9999999999999", "12abc", "+3" };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    luaretry_call_options o;
    step_options(&o, 7);
    CHECK_CODE(inbound(p, &o, "Luaretry-Retries", bad[i], "Luaretry-Deadline-Ms", bad[i]),
               LUARETRY_E_ARG);
    CHECK_EQ_INT(o.flags & (LUARETRY_CALL_RETRIES | LUARETRY_CALL_DEADLINE), 0);
    step_options(&o, 7);
    CHECK_CODE(inbound(p, &o, "Luaretry-Retries", bad[i], "Luaretry-Retries", "2"), LUARETRY_E_ARG);
    CHECK_EQ_INT(o.retries, 2);
  }
  luaretry_call_options o;
  step_options(&o, 7);
  CHECK_CODE(luaretry_call_options_inbound(NULL, NULL, 0, &o), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_call_options_inbound(p, NULL, 1, &o), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_call_options_inbound(p, NULL, 0, NULL), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_call_options_inbound(p, NULL, 0, &o), LUARETRY_OK); /* nothing came */
  CHECK_EQ_INT(o.flags & (LUARETRY_CALL_RETRIES | LUARETRY_CALL_DEADLINE), 0);
}

/* Inbound values never raise what the host set already. */
static void test_never_raises(luaretry_policy *p) {
  luaretry_call_options o;
  step_options(&o, 7);
  o.flags |= LUARETRY_CALL_RETRIES | LUARETRY_CALL_DEADLINE;
  o.retries = 1;
  o.deadline = luaretry_deadline_in(0.5);
  double set = o.deadline;
  CHECK_CODE(inbound(p, &o, "Luaretry-Retries", "5", "Luaretry-Deadline-Ms", "60000"), LUARETRY_OK);
  CHECK_EQ_INT(o.retries, 1);
  CHECK_EQ_DBL(o.deadline, set);
}

/* A call begun with o stops with DEADLINE when the first attempt is
 * asked for: no attempt. */
static void ends_at_once(luaretry_policy *p, const luaretry_call_options *o) {
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, o, &c), LUARETRY_OK);
  luaretry_decision d;
  CHECK_CODE(luaretry_call_next(c, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.retry, 0);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_DEADLINE);
  CHECK_EQ_INT(d.attempt, 0);
  luaretry_call_free(c);
}

/* A NaN deadline the host set stops the call at once (luaretry.h); an
 * inbound deadline is later than "at once" and leaves it so (it took
 * the NaN for no deadline, and set the inbound one). */
static void test_nan_stays(luaretry_policy *p) {
  luaretry_call_options o;
  step_options(&o, 7);
  o.flags |= LUARETRY_CALL_DEADLINE;
  o.deadline = NAN;
  CHECK_CODE(inbound(p, &o, "Luaretry-Deadline-Ms", "5000", NULL, NULL), LUARETRY_OK);
  CHECK(isnan(o.deadline));
  ends_at_once(p, &o);
}

/* A deadline of 0 ms has passed: the call ends at once, no attempt. */
static void test_passed(luaretry_policy *p) {
  luaretry_call_options o;
  step_options(&o, 7);
  CHECK_CODE(inbound(p, &o, "Luaretry-Deadline-Ms", "0", NULL, NULL), LUARETRY_OK);
  ends_at_once(p, &o);
}

static void report(luaretry_call *c, int status, const char *error, luaretry_decision *d) {
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.status = status;
  o.error = error;
  luaretry_decision next;
  CHECK_CODE(luaretry_call_next(c, &next), LUARETRY_OK);
  CHECK_CODE(luaretry_call_report(c, &o, d), LUARETRY_OK);
}

/* Told 0 retries, the call makes one attempt of what its caller sees; a
 * connect or dns failure (no connection made: the caller cannot see it)
 * is retried here all the same, within the policy's max_attempts. */
static void test_allowance(luaretry_policy *p) {
  luaretry_call_options o;
  step_options(&o, 7);
  CHECK_CODE(inbound(p, &o, "Luaretry-Retries", "0", NULL, NULL), LUARETRY_OK);
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, &o, &c), LUARETRY_OK);
  luaretry_decision d;
  report(c, 0, "connect", &d);
  CHECK_EQ_INT(d.retry, 1);
  report(c, 0, "dns", &d);
  CHECK_EQ_INT(d.retry, 1);
  report(c, 503, NULL, &d);
  CHECK_EQ_INT(d.retry, 0);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_EXHAUSTED);
  CHECK_EQ_STR(d.rule, "retries");
  CHECK_EQ_INT(d.attempt, 3);
  luaretry_call_free(c);
  /* connect failures alone: still the policy's 4 attempts at most */
  step_options(&o, 7);
  inbound(p, &o, "Luaretry-Retries", "0", NULL, NULL);
  CHECK_CODE(luaretry_call_begin(p, &o, &c), LUARETRY_OK);
  for (int i = 1; i <= 4; i++) report(c, 0, "connect", &d);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_EXHAUSTED);
  CHECK_EQ_STR(d.rule, "max_attempts");
  luaretry_call_free(c);
  /* 1 retry allowed: two attempts of 503 */
  step_options(&o, 7);
  inbound(p, &o, "Luaretry-Retries", "1", NULL, NULL);
  CHECK_CODE(luaretry_call_begin(p, &o, &c), LUARETRY_OK);
  report(c, 503, NULL, &d);
  CHECK_EQ_INT(d.retry, 1);
  report(c, 503, NULL, &d);
  CHECK_EQ_INT(d.retry, 0);
  CHECK_EQ_STR(d.rule, "retries");
  luaretry_call_free(c);
}

static const char *header(const luaretry_request *r, const char *name) {
  for (size_t i = 0; i < r->header_count; i++)
    if (strcasecmp(r->headers[i].name, name) == 0) return r->headers[i].value;
  return NULL;
}

/* Outbound: each attempt carries its own timeout in ms and 0 retries while
 * the call retries itself; a call that cannot retry (max_attempts 1)
 * hands its caller's allowance on, and sends none when it got none. */
static void test_outbound(luaretry_policy *p, luaretry_policy *once) {
  luaretry_call_options o;
  step_options(&o, 7);
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, &o, &c), LUARETRY_OK);
  luaretry_header keep[2] = { { "Accept", "*/*" }, { "luaretry-retries", "9" } };
  luaretry_request in = {
    .method = "GET", .url = "http://127.0.0.1:1/", .headers = keep, .header_count = 2
  };
  luaretry_request out;
  CHECK_CODE(luaretry_call_prepare(c, &in, 1, &out), LUARETRY_OK);
  CHECK_EQ_STR(header(&out, "Luaretry-Deadline-Ms"), "4000");
  CHECK_EQ_STR(header(&out, "Luaretry-Retries"), "0"); /* over the request's own 9 */
  CHECK_EQ_STR(header(&out, "Accept"), "*/*");
  CHECK_EQ_INT(out.header_count, 3);
  luaretry_call_free(c);
  step_options(&o, 7);
  CHECK_CODE(luaretry_call_begin(once, &o, &c), LUARETRY_OK);
  CHECK_CODE(luaretry_call_prepare(c, &in, 1, &out), LUARETRY_OK);
  CHECK(header(&out, "X-Left") != NULL);
  CHECK_EQ_STR(header(&out, "luaretry-retries"), "9"); /* the request's own, untouched */
  CHECK(header(&out, "Luaretry-Deadline-Ms") == NULL); /* renamed X-Left */
  luaretry_call_free(c);
  inbound(once, &o, "x-left", "1500", "luaretry-retries", "2");
  CHECK_CODE(luaretry_call_begin(once, &o, &c), LUARETRY_OK);
  CHECK_CODE(luaretry_call_prepare(c, &in, 1, &out), LUARETRY_OK);
  CHECK_EQ_STR(header(&out, "luaretry-retries"), "2"); /* handed on */
  const char *left = header(&out, "X-Left");
  CHECK(left && atof(left) <= 1500 && atof(left) >= 1400);
  luaretry_call_free(c);
}

/* The time passed on is the attempt's own when it is sent: an attempt
 * asked for late, and a hedge, each carry what is left then (both
 * carried the call's first timeout, and luaretry_call_timeout said it
 * too); the longest is 12 digits, which the next layer reads. */
static void test_outbound_when_sent(void) {
  luaretry_policy *p = step_load("late.lua",
                                 "name = \"late\"\nmax_attempts = 4\ndeadline = 2\n"
                                 "hedge = { delay = 0.4, max = 1 }\npropagate = {}\n");
  luaretry_request in = { .method = "GET", .url = "http://127.0.0.1:1/" }, out;
  luaretry_call *c = step_begin(p, 7);
  luaretry_decision d;
  CHECK_CODE(luaretry_call_wait(c, 0.6), LUARETRY_OK); /* the host asks late */
  CHECK_CODE(luaretry_call_next(c, &d), LUARETRY_OK);
  CHECK_NEAR(d.next_timeout, 1.4, 1e-9);
  CHECK_NEAR(luaretry_call_timeout(c), 1.4, 1e-9);
  CHECK_CODE(luaretry_call_prepare(c, &in, 1, &out), LUARETRY_OK);
  CHECK_EQ_STR(header(&out, "Luaretry-Deadline-Ms"), "1400");
  luaretry_call_free(c);

  c = step_begin(p, 7);
  int id;
  CHECK_CODE(luaretry_call_start(c, &id), LUARETRY_OK);
  CHECK_CODE(luaretry_call_prepare(c, &in, id, &out), LUARETRY_OK);
  CHECK_EQ_STR(header(&out, "Luaretry-Deadline-Ms"), "2000");
  CHECK_CODE(luaretry_call_wait(c, 0.4), LUARETRY_OK);
  CHECK_CODE(luaretry_call_hedge(c, &in, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.hedge, 1);
  CHECK_NEAR(d.next_timeout, 1.6, 1e-9);
  CHECK_CODE(luaretry_call_prepare(c, &in, d.attempt, &out), LUARETRY_OK);
  CHECK_EQ_STR(header(&out, "Luaretry-Deadline-Ms"), "1600");
  luaretry_call_free(c);
  luaretry_policy_free(p);

  p = step_load("long.lua", "name = \"long\"\nmax_attempts = 2\ndeadline = 1e9\npropagate = {}\n");
  c = step_begin(p, 7);
  CHECK_CODE(luaretry_call_prepare(c, &in, 1, &out), LUARETRY_OK);
  const char *ms = header(&out, "Luaretry-Deadline-Ms");
  CHECK_EQ_STR(ms, "999999999999");
  luaretry_call_options o;
  step_options(&o, 7);
  CHECK_CODE(inbound(p, &o, "Luaretry-Deadline-Ms", ms ? ms : "", NULL, NULL), LUARETRY_OK);
  CHECK(o.flags & LUARETRY_CALL_DEADLINE);
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

/* Bad names are load errors naming the field; without propagate nothing
 * is added. */
static void test_policy_fields(void) {
  luaretry_policy *p = NULL;
  luaretry_policy_new(&p);
  CHECK_CODE(luaretry_policy_load_string(p, "bad.lua",
                                         "max_attempts = 2\npropagate = { deadline = \"a b\" }\n"),
             LUARETRY_E_POLICY);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "propagate.deadline");
  CHECK_CODE(luaretry_policy_load_string(p, "bad.lua", "max_attempts = 2\npropagate = 1\n"),
             LUARETRY_E_POLICY);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "propagate");
  CHECK_CODE(luaretry_policy_load_string(p, "off.lua", "max_attempts = 2\n"), LUARETRY_OK);
  luaretry_call_options o;
  step_options(&o, 7);
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, &o, &c), LUARETRY_OK);
  luaretry_request in = { .method = "GET", .url = "http://127.0.0.1:1/" };
  luaretry_request out;
  CHECK_CODE(luaretry_call_prepare(c, &in, 1, &out), LUARETRY_OK);
  CHECK_EQ_INT(out.header_count, 0);
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

int main(void) {
  luaretry_policy *p = step_load("mid.lua", MID);
  luaretry_policy *once = step_load("once.lua",
                                    "name = \"once\"\nmax_attempts = 1\ndeadline = 30\n"
                                    "propagate = { deadline = \"X-Left\" }\n");
  test_repeated(p);
  test_garbage(p);
  test_never_raises(p);
  test_nan_stays(p);
  test_passed(p);
  test_allowance(p);
  test_outbound(p, once);
  test_policy_fields();
  test_outbound_when_sent();
  luaretry_policy_free(p);
  luaretry_policy_free(once);
  return check_done();
}
