/* test_fleet_calls.c: a policy's fleet under threads, through the public
 * API, against a real redis-server (redis_helper.h: loopback port, stopped
 * by PID).  Four threads make calls (successes, failures and the pre-retry
 * check) on one policy with fleet.redis while a fifth changes its settings
 * and reloads it: some changes keep the fleet (guard numbers), some make a
 * new one (fleet.key, fleet.sync), so calls in flight keep using a fleet
 * whose policy has moved on, and the old one goes with its last call.
 * Also run under ThreadSanitizer (make test) and AddressSanitizer.
 * Then: every call ended with a decision, the metrics say fleet, and Redis
 * holds the counts of the last key. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "redis_helper.h"
#include "step_support.h"

#define THREADS 4
#define CALLS   400

static const char *POLICY =
  "name = 'threads'\n"
  "max_attempts = 3\n"
  "deadline = 30\n"
  "attempt_timeout = 5\n"
  "budget = { max_tokens = 1000, token_ratio = 0.5 }\n"
  "breaker = { failures = 1000000, open_seconds = 1 }\n"
  "admission = { k = 1000, window = 60 }\n" /* counted fleet-wide, refusing nothing */
  "hedge = { delay = 0.001, max = 1 }\n"    /* a hedge's token, spent fleet-wide */
  "fleet = { sync = 5 }\n";
static const char *POLICY_UNTHROTTLED =
  "name = 'threads'\nmax_attempts = 3\ndeadline = 30\n"
  "budget = { max_tokens = 1000, token_ratio = 0.5 }\nfleet = { sync = 5 }\n";

static luaretry_policy *p;
static atomic_int done_threads, decided, bad;

/* An attempt started, a hedge beside it once due (its token goes into the
 * fleet's batch), the first attempt's success. */
static void hedged(luaretry_call *c) {
  int id = 0;
  if (luaretry_call_start(c, &id) != LUARETRY_OK) atomic_fetch_add(&bad, 1);
  for (int k = 0; k < 200 && luaretry_call_hedge_in(c) > 0; k++) redis_sleep_ms(1);
  luaretry_decision d;
  if (luaretry_call_hedge(c, &STEP_GET, &d) != LUARETRY_OK) atomic_fetch_add(&bad, 1);
  luaretry_outcome ok = step_status(200);
  if (luaretry_call_report_attempt(c, id, &ok, &d) != LUARETRY_OK) atomic_fetch_add(&bad, 1);
}

static void *caller(void *arg) {
  int id = (int)(long)arg;
  for (int i = 0; i < CALLS; i++) {
    luaretry_call *c;
    if (luaretry_call_begin(p, NULL, &c) != LUARETRY_OK) {
      atomic_fetch_add(&bad, 1);
      continue;
    }
    luaretry_decision d;
    /* the pre-attempt check: the throttle may refuse (a new fleet key
     * starts a new window: one failure in it refuses half) */
    if (luaretry_call_next(c, &d) != LUARETRY_OK) atomic_fetch_add(&bad, 1);
    if (d.retry && i % 16 == 0) {
      hedged(c);
    } else if (d.retry) {
      luaretry_outcome o;
      luaretry_outcome_init(&o);
      o.status = (i + id) % 3 == 0 ? 503 : (i + id) % 5 == 1 ? 429 : 200; /* 429: throttled */
      if (luaretry_call_report(c, &o, &d) != LUARETRY_OK) atomic_fetch_add(&bad, 1);
      if (d.retry && luaretry_call_next(c, &d) != LUARETRY_OK) atomic_fetch_add(&bad, 1);
    }
    atomic_fetch_add(&decided, 1);
    luaretry_call_free(c);
  }
  atomic_fetch_add(&done_threads, 1);
  return NULL;
}

/* Settings that keep the fleet, and settings that replace it. */
static void *changer(void *arg) {
  (void)arg;
  static const char *const sets[][2] = {
    { "budget.token_ratio", "0.4" }, { "fleet.key", "threads-b" },
    { "budget.token_ratio", "0.5" }, { "fleet.sync", "7" },
    { "breaker.open_seconds", "2" }, { "fleet.key", "threads-c" },
  };
  for (int round = 0; atomic_load(&done_threads) < THREADS && round < 100000; round++) {
    const char *const *s = sets[round % 6];
    if (luaretry_policy_set(p, s[0], s[1]) != LUARETRY_OK) atomic_fetch_add(&bad, 1);
    if (round % 7 == 0 && luaretry_policy_load_string(p, "=threads", POLICY) != LUARETRY_OK)
      atomic_fetch_add(&bad, 1);
    luaretry_metrics m;
    luaretry_policy_metrics(p, &m);
    redis_sleep_ms(2);
  }
  return NULL;
}

int main(void) {
  redis_srv srv;
  if (redis_start(&srv, (const char *)NULL) != 0) return 1;
  char url[100];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", srv.port);
  CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_set(p, "fleet.redis", url), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_set(p, "fleet.command_timeout", "2000"), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_load_string(p, "=threads", POLICY), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_fleet_sync(p), LUARETRY_OK);
  pthread_t t[THREADS + 1];
  for (long i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, caller, (void *)i);
  pthread_create(&t[THREADS], NULL, changer, NULL);
  for (int i = 0; i <= THREADS; i++) pthread_join(t[i], NULL);
  CHECK_EQ_INT((long)atomic_load(&bad), 0);
  CHECK_EQ_INT((long)atomic_load(&decided), (long)THREADS * CALLS);
  /* the last settings: a known key, synced now */
  CHECK_CODE(luaretry_policy_set(p, "fleet.key", "threads-last"), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_fleet_sync(p), LUARETRY_OK);
  luaretry_metrics m;
  CHECK_CODE(luaretry_policy_metrics(p, &m), LUARETRY_OK);
  CHECK_EQ_INT((long)m.guards, (long)LUARETRY_GUARDS_FLEET);
  CHECK(m.hedges > 0);
  CHECK(m.throttled > 0);
  luaretry_fleet_status st;
  CHECK_CODE(luaretry_policy_fleet_status(p, &st), LUARETRY_OK);
  CHECK(st.exists);
  CHECK_EQ_STR(st.key, "luaretry:{threads-last}");
  CHECK_EQ_INT((long)st.process_count, 1);
  luaretry_fleet_status_free(&st);
  /* a call on the virtual clock counts nowhere in Redis.  Without the
   * throttle: on counts that start afresh it refuses a first request half
   * the time (1 / (1 + 1)), and that call would end before its report */
  CHECK_CODE(luaretry_policy_load_string(p, "=threads", POLICY_UNTHROTTLED), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_fleet_reset(p), LUARETRY_OK);
  luaretry_call_options vo = { .flags = LUARETRY_CALL_VIRTUAL_TIME };
  luaretry_call *c;
  CHECK_CODE(luaretry_call_begin(p, &vo, &c), LUARETRY_OK);
  luaretry_outcome o = step_status(503);
  luaretry_decision d;
  CHECK_CODE(luaretry_call_report(c, &o, &d), LUARETRY_OK);
  luaretry_call_free(c);
  CHECK_CODE(luaretry_policy_fleet_status(p, &st), LUARETRY_OK);
  CHECK(!st.exists);
  luaretry_fleet_status_free(&st);
  luaretry_policy_free(p);
  redis_stop(&srv);
  return check_done();
}
