/* test_overlap.c: everything luaretry.h says may overlap, overlapping.  Four
 * threads run calls on one policy (begin, report until a stop, the call's
 * own prepare and is_idempotent) while a fifth changes settings
 * (luaretry_policy_set) and reloads the script, a sixth uses the
 * policy-level request functions (is_idempotent, prepare) and runs the
 * workflow through a transport of its own, and a seventh reads metrics
 * and tuning.  Each call must decide as its load says; `make test` runs
 * this under ThreadSanitizer, which must stay silent. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "luaretry.h"

#define CALL_THREADS 4
#define CALLS_EACH   1500
#define CHANGES      40

static const char *const SCRIPT[2] = {
  "name = 'overlap'\n"
  "max_attempts = 4\n"
  "deadline = 60\n"
  "backoff = { initial = 0.01, jitter = 'full' }\n"
  "function is_transient(status, body, info)\n"
  "  info.call.n = (info.call.n or 0) + 1\n"
  "  return status == 503\n"
  "end\n"
  "function is_idempotent(request) return request.method ~= 'POST' end\n"
  "function prepare(request, attempt, info)\n"
  "  info.call.key = info.call.key or ('k' .. attempt)\n"
  "  request.headers['Idempotency-Key'] = info.call.key\n"
  "end\n"
  "function run(http, args)\n"
  "  local r = http.get('http://example.invalid/item')\n"
  "  return r.status, r.body\n"
  "end\n",
  "name = 'overlap'\n"
  "max_attempts = 4\n"
  "deadline = 60\n"
  "function is_transient(status) return status == 503 end\n"
  "function is_idempotent(request) return request.method ~= 'POST' end\n"
  "function prepare(request, attempt) request.headers['X-Attempt'] = tostring(attempt) end\n"
  "function run(http, args) return http.get('http://example.invalid/item').status, 'ok' end\n",
};

static luaretry_policy *policy;
static atomic_int stop_changes;
static atomic_long decided, wrong;

static void *caller(void *arg) {
  long id = (long)(intptr_t)arg;
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  for (int n = 0; n < CALLS_EACH; n++) {
    luaretry_call_options opt;
    luaretry_call_options_init(&opt);
    opt.flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME;
    opt.seed = (uint64_t)(id * 100000 + n);
    luaretry_call *c;
    if (luaretry_call_begin(policy, &opt, &c) != LUARETRY_OK) {
      atomic_fetch_add(&wrong, 1);
      continue;
    }
    luaretry_header h[1] = { { "accept", "*/*" } };
    luaretry_request req = {
      .method = "GET", .url = "http://example.invalid/", .headers = h, .header_count = 1
    };
    luaretry_request out;
    int idem = 0;
    if (luaretry_call_prepare(c, &req, 1, &out) != LUARETRY_OK ||
        luaretry_call_is_idempotent(c, &out, &idem) != LUARETRY_OK || !idem)
      atomic_fetch_add(&wrong, 1);
    luaretry_decision d;
    int statuses[3] = { 503, 503, 200 };
    for (int a = 0; a < 3; a++) {
      o.status = statuses[a];
      if (luaretry_call_report(c, &o, &d) != LUARETRY_OK) break;
      if (!d.retry) break;
      luaretry_call_wait(c, d.wait);
    }
    if (d.reason == LUARETRY_REASON_SUCCESS && d.attempt == 3)
      atomic_fetch_add(&decided, 1);
    else
      atomic_fetch_add(&wrong, 1);
    luaretry_call_free(c);
  }
  return NULL;
}

static void *changer(void *arg) {
  (void)arg;
  static const char *const values[] = { "5", "6", "4" };
  for (int i = 0; i < CHANGES; i++) {
    char name[32];
    snprintf(name, sizeof name, "=overlap%d", i % 2);
    if (luaretry_policy_load_string(policy, name, SCRIPT[i % 2]) != LUARETRY_OK ||
        luaretry_policy_set(policy, "max_attempts", values[i % 3]) != LUARETRY_OK ||
        luaretry_policy_set(policy, "backoff.initial", i % 2 ? "0.02" : "0.01") != LUARETRY_OK)
      atomic_fetch_add(&wrong, 1);
  }
  atomic_store(&stop_changes, 1);
  return NULL;
}

static luaretry_code transport(void *ud, const luaretry_request *req, double timeout,
                               luaretry_response *resp) {
  (void)ud;
  (void)req;
  (void)timeout;
  memset(resp, 0, sizeof *resp);
  resp->status = 200;
  resp->body = "item";
  resp->body_len = 4;
  return LUARETRY_OK;
}

static void *requester(void *arg) {
  (void)arg;
  while (!atomic_load(&stop_changes)) {
    luaretry_request req = { .method = "POST", .url = "http://example.invalid/" };
    luaretry_request out;
    int idem = 1;
    if (luaretry_policy_is_idempotent(policy, &req, &idem) != LUARETRY_OK || idem ||
        luaretry_policy_prepare(policy, &req, 2, &out) != LUARETRY_OK)
      atomic_fetch_add(&wrong, 1);
    luaretry_outcome o;
    if (luaretry_policy_run_workflow(policy, NULL, 0, transport, NULL, 5, &o) != LUARETRY_OK ||
        o.status != 200)
      atomic_fetch_add(&wrong, 1);
  }
  return NULL;
}

static void *reader(void *arg) {
  (void)arg;
  while (!atomic_load(&stop_changes)) {
    luaretry_metrics m;
    luaretry_tuning t;
    char buf[64];
    if (luaretry_policy_metrics(policy, &m) != LUARETRY_OK ||
        luaretry_policy_tuning(policy, &t) != LUARETRY_OK ||
        luaretry_policy_get(policy, "max_attempts", buf, sizeof buf) != LUARETRY_OK)
      atomic_fetch_add(&wrong, 1);
  }
  return NULL;
}

int main(void) {
  luaretry_policy_new(&policy);
  /* what is tested here is not time: a busy machine (two cores shared,
   * ASan) may preempt one of its many hooks past the 0.25 s time limit */
  CHECK_CODE(luaretry_policy_set(policy, "time_limit", "60"), LUARETRY_OK);
  if (!CHECK_CODE(luaretry_policy_load_string(policy, "=overlap0", SCRIPT[0]), LUARETRY_OK))
    return check_done();
  pthread_t t[CALL_THREADS + 3];
  for (long i = 0; i < CALL_THREADS; i++) pthread_create(&t[i], NULL, caller, (void *)(intptr_t)i);
  pthread_create(&t[CALL_THREADS], NULL, changer, NULL);
  pthread_create(&t[CALL_THREADS + 1], NULL, requester, NULL);
  pthread_create(&t[CALL_THREADS + 2], NULL, reader, NULL);
  for (int i = 0; i < CALL_THREADS + 3; i++) pthread_join(t[i], NULL);
  CHECK_EQ_INT(atomic_load(&wrong), 0);
  CHECK_EQ_INT(atomic_load(&decided), CALL_THREADS * CALLS_EACH);
  luaretry_metrics m;
  luaretry_policy_metrics(policy, &m);
  CHECK_EQ_INT((long)m.calls, CALL_THREADS * CALLS_EACH);
  CHECK_EQ_INT((long)m.attempts, 3L * CALL_THREADS * CALLS_EACH);
  printf(
    "test_overlap: %d calls on %d threads while %d loads and %d sets ran, and the "
    "policy-level functions and workflow on another\n",
    CALL_THREADS * CALLS_EACH, CALL_THREADS, CHANGES, 2 * CHANGES);
  luaretry_policy_free(policy);
  return check_done();
}
