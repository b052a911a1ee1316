/* test_null.c: every public function of luaretry.h and luaretry_curl.h
 * (and of the command's luaretry_tool.h) called with NULL for every handle
 * and pointer: a code (LUARETRY_E_ARG where it returns one), an empty
 * answer or nothing done, never a crash; and with a handle of the other
 * kind (a call for a policy, a policy for a call): the same.  `make test` runs it under ASan
 * too.  A function added to a header belongs here. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "luaretry_curl.h"
#include "luaretry_tool.h"

#define E_ARG(expr) CHECK_CODE((expr), LUARETRY_E_ARG)

static void test_versions_and_names(void) {
  CHECK(luaretry_version(NULL) != NULL);
  CHECK(luaretry_lua_version() != NULL);
  CHECK(luaretry_strerror((luaretry_code)-1) != NULL);
  CHECK(luaretry_backoff_kind_name((luaretry_backoff_kind)-1) != NULL);
  CHECK(luaretry_jitter_name((luaretry_jitter)-1) != NULL);
  CHECK(luaretry_breaker_state_name((luaretry_breaker_state)-1) != NULL);
  CHECK(luaretry_guards_scope_name((luaretry_guards_scope)-1) != NULL);
  CHECK(luaretry_reason_name((luaretry_reason)-1) != NULL);
  CHECK(luaretry_wait_source_name((luaretry_wait_source)-1) != NULL);
  CHECK(luaretry_field_at((size_t)-1) == NULL);
  CHECK(luaretry_field_count() > 0);
  CHECK(luaretry_clock_now() > 0);
  CHECK(isnan(luaretry_deadline_in(NAN)));
}

static void test_policy(void) {
  E_ARG(luaretry_policy_new(NULL));
  luaretry_policy_free(NULL);
  E_ARG(luaretry_policy_set(NULL, NULL, NULL));
  E_ARG(luaretry_policy_load_file(NULL, NULL));
  E_ARG(luaretry_policy_load_string(NULL, NULL, NULL));
  E_ARG(luaretry_policy_reload_if_changed(NULL, NULL));
  CHECK(luaretry_policy_errmsg(NULL) != NULL);
  E_ARG(luaretry_policy_find(NULL, NULL, 0));
  E_ARG(luaretry_policy_dir(0, NULL, 0));
  CHECK_EQ_INT(luaretry_policy_warning_count(NULL), 0);
  CHECK(luaretry_policy_warning(NULL, 0) == NULL);
  CHECK_EQ_INT(luaretry_policy_memory(NULL), 0);
  E_ARG(luaretry_policy_get(NULL, NULL, NULL, 0));
  E_ARG(luaretry_policy_tuning(NULL, NULL));
  E_ARG(luaretry_policy_metrics(NULL, NULL));
  CHECK_EQ_DBL(luaretry_policy_rate(NULL), 0);
  luaretry_policy_on_breaker(NULL, NULL, NULL);
  luaretry_policy_on_log(NULL, NULL, NULL);
  luaretry_policy_on_fleet(NULL, NULL, NULL);
  E_ARG(luaretry_policy_fleet_sync(NULL));
  E_ARG(luaretry_policy_fleet_status(NULL, NULL));
  luaretry_fleet_status_free(NULL);
  E_ARG(luaretry_policy_fleet_reset(NULL));
  E_ARG(luaretry_policy_set_classifier(NULL, NULL, NULL));
  luaretry_request_init(NULL);
  luaretry_outcome_init(NULL);
  E_ARG(luaretry_policy_is_idempotent(NULL, NULL, NULL));
  E_ARG(luaretry_policy_prepare(NULL, NULL, 0, NULL));
  CHECK_EQ_INT(luaretry_policy_has_workflow(NULL), 0);
  E_ARG(luaretry_policy_run_workflow(NULL, NULL, 0, NULL, NULL, 0, NULL));
  E_ARG(luaretry_simulate(NULL, 0, 0, NULL, NULL));
  double w = 0, r = 0;
  E_ARG(luaretry_retry_after(NULL, 0, NULL));
  E_ARG(luaretry_retry_after(NULL, 0, &w));
  E_ARG(luaretry_rate_limit(NULL, 1, 0, NULL));
  E_ARG(luaretry_rate_quota(NULL, 1, 0, NULL, NULL));
  E_ARG(luaretry_rate_quota(NULL, 1, 0, &w, &r));
}

static void test_call(void) {
  luaretry_call_options_init(NULL);
  E_ARG(luaretry_call_begin(NULL, NULL, NULL));
  CHECK_EQ_DBL(luaretry_call_timeout(NULL), 0);
  CHECK_EQ_DBL(luaretry_call_deadline(NULL), 0);
  CHECK_EQ_DBL(luaretry_call_connect_timeout(NULL), 0);
  luaretry_call_stall(NULL, NULL, NULL);
  double s = -1;
  long speed = -1;
  luaretry_call_stall(NULL, &s, &speed);
  CHECK_EQ_DBL(s, 0);
  E_ARG(luaretry_call_next(NULL, NULL));
  E_ARG(luaretry_call_report(NULL, NULL, NULL));
  CHECK_EQ_DBL(luaretry_call_elapsed(NULL), 0);
  CHECK(luaretry_call_errmsg(NULL) != NULL);
  luaretry_call_free(NULL);
  E_ARG(luaretry_call_is_idempotent(NULL, NULL, NULL));
  E_ARG(luaretry_call_prepare(NULL, NULL, 0, NULL));
  CHECK(luaretry_call_invocation_id(NULL) != NULL);
  CHECK_EQ_INT(luaretry_call_wakeup_fd(NULL), -1);
  luaretry_call_stop_cancelled(NULL, NULL);
  E_ARG(luaretry_call_stop_as(NULL, NULL, NULL));
  E_ARG(luaretry_call_wait(NULL, 0));
  luaretry_call_on_decision(NULL, NULL, NULL);
  luaretry_call_cancel(NULL);
  CHECK_EQ_INT(luaretry_call_cancelled(NULL), 0);
  E_ARG(luaretry_call_run(NULL, NULL, NULL, NULL));
  E_ARG(luaretry_call_start(NULL, NULL));
  CHECK(luaretry_call_hedge_in(NULL) < 0);
  E_ARG(luaretry_call_hedge(NULL, NULL, NULL));
  E_ARG(luaretry_call_report_attempt(NULL, 1, NULL, NULL));
}

static void test_curl(void) {
  CHECK_EQ_INT(luaretry_curl_resumable(NULL), 0);
  luaretry_curl_options_init(NULL);
  E_ARG(luaretry_curl_perform(NULL, NULL, NULL, NULL, NULL, NULL));
  E_ARG(luaretry_curl_many_new(NULL));
  luaretry_curl_many_free(NULL);
  luaretry_curl_many_cancel(NULL);
  CHECK_EQ_INT(luaretry_curl_many_cancelled(NULL), 0);
  CHECK(luaretry_curl_many_multi(NULL) == NULL);
  E_ARG(luaretry_curl_many_next_fd(NULL, 0));
  luaretry_curl_many_options_init(NULL);
  E_ARG(luaretry_curl_perform_many(NULL, NULL, NULL, 0, NULL));
  E_ARG(luaretry_curl_transport_new(NULL, NULL, NULL));
  luaretry_curl_transport_free(NULL);
  E_ARG(luaretry_curl_transport_perform(NULL, NULL, 0, NULL));
  E_ARG(luaretry_curl_transport_hedge(NULL, NULL, NULL, NULL));
  E_ARG(luaretry_curl_transport_policy(NULL, NULL));
  (void)luaretry_curl_error_name((CURLcode)-1); /* NULL or a name: never a crash */
  CHECK_EQ_INT(luaretry_curl_never_sent((CURLcode)-1), 0);
}

/* The command's (unstable, but no less careful). */
static void test_tool(void) {
  luaretry_policy_warn_undefined_globals(NULL, 1);
  CHECK(luaretry_policy_origin(NULL, NULL) == NULL);
  E_ARG(luaretry_policy_probe_on_breaker(NULL, NULL, NULL, 0));
  E_ARG(luaretry_simulate_herd(NULL, NULL, NULL));
  luaretry_latency_options_init(NULL);
  E_ARG(luaretry_simulate_latency(NULL, NULL, NULL));
  E_ARG(luaretry_policy_sample_backoff(NULL, 0, 0, 0, NULL, 0));
}

/* A handle of the other kind (a call where a policy goes, a policy where
 * a call goes): refused like NULL, the real handles untouched. */
static void test_foreign(void) {
  luaretry_policy *p = NULL;
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_load_string(p, "=foreign", "max_attempts = 2\n"), LUARETRY_OK);
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
  luaretry_policy *cp = (luaretry_policy *)c; /* a call, as a policy */
  luaretry_call *pc = (luaretry_call *)p;     /* a policy, as a call */
  luaretry_metrics m;
  luaretry_tuning t;
  luaretry_decision d;
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  luaretry_call *other = (luaretry_call *)&t;
  E_ARG(luaretry_policy_set(cp, "max_attempts", "3"));
  E_ARG(luaretry_policy_load_string(cp, "=x", "max_attempts = 1\n"));
  E_ARG(luaretry_policy_load_file(cp, "x.lua"));
  E_ARG(luaretry_policy_metrics(cp, &m));
  E_ARG(luaretry_policy_tuning(cp, &t));
  E_ARG(luaretry_call_begin(cp, NULL, &other));
  CHECK(other == NULL);
  CHECK_EQ_STR(luaretry_policy_errmsg(cp), "no policy");
  CHECK_EQ_INT(luaretry_policy_warning_count(cp), 0);
  luaretry_policy_on_log(cp, NULL, NULL);
  luaretry_policy_free(cp); /* nothing freed: the call goes on */
  E_ARG(luaretry_call_next(pc, &d));
  E_ARG(luaretry_call_report(pc, &o, &d));
  E_ARG(luaretry_call_report_attempt(pc, 1, &o, &d));
  E_ARG(luaretry_call_wait(pc, 0));
  CHECK_EQ_STR(luaretry_call_errmsg(pc), "no call");
  luaretry_call_cancel(pc);
  luaretry_call_free(pc); /* nothing freed: the policy goes on */
  o.status = 200;
  CHECK_CODE(luaretry_call_report(c, &o, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_SUCCESS);
  luaretry_call_free(c);
  luaretry_policy_free(p);
}

int main(void) {
  test_versions_and_names();
  test_policy();
  test_call();
  test_curl();
  test_tool();
  test_foreign();
  return check_done();
}
