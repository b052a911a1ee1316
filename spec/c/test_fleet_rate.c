/* test_fleet_rate.c: the fleet's rate limiter under threads, through the
 * public API, against a real redis-server (redis_helper.h).  Three policy
 * handles stand for three processes of a fleet (each its own fleet handle,
 * connection and lease); five threads make blocking calls on them (two
 * share a handle, so its lease and connection are shared by threads), each
 * attempt's moment recorded, while another thread reloads one handle with
 * the same settings.  Also run under ThreadSanitizer (make test).
 * Then: the attempts of all three, in any second, stay within
 * limit + burst + what the three may hold leased (README "Fleet"), and the
 * run lasts as long as the fleet's one limit says, not a third of it. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "engine/engine.h"
#include "luaretry.h"
#include "redis_helper.h"

#define HANDLES 3
#define THREADS 5
#define CALLS   30
#define LIMIT   50
#define BLOCK   5 /* the most a process leases at once: a tenth of a second of LIMIT */

static const char *POLICY =
  "name = 'fleet-rate-threads'\n"
  "max_attempts = 1\n"
  "deadline = 30\n"
  "attempt_timeout = 5\n"
  "rate = { limit = 50, burst = 1 }\n";

static luaretry_policy *handles[HANDLES];
static double moments[THREADS * CALLS];
static atomic_int recorded, bad, callers_done;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static luaretry_code attempt(void *ud, luaretry_call *c, int n, double timeout,
                             luaretry_outcome *out) {
  (void)ud, (void)c, (void)n, (void)timeout;
  int k = atomic_fetch_add(&recorded, 1);
  if (k < THREADS * CALLS) moments[k] = now_s();
  out->status = 200;
  return LUARETRY_OK;
}

static void *caller(void *arg) {
  luaretry_policy *p = handles[(long)arg % HANDLES]; /* threads 0 and 3 share one */
  for (int i = 0; i < CALLS; i++) {
    luaretry_call *c;
    luaretry_decision d;
    if (luaretry_call_begin(p, NULL, &c) != LUARETRY_OK) {
      atomic_fetch_add(&bad, 1);
      continue;
    }
    if (luaretry_call_run(c, attempt, NULL, &d) != LUARETRY_OK ||
        d.reason != LUARETRY_REASON_SUCCESS)
      atomic_fetch_add(&bad, 1);
    luaretry_call_free(c);
  }
  atomic_fetch_add(&callers_done, 1);
  return NULL;
}

/* Reloads handle 1 while calls run on it (the same settings: its fleet,
 * bucket and lease go on), so TSan sees a reload beside the leases. */

static void *reloader(void *arg) {
  (void)arg;
  for (int round = 0; atomic_load(&callers_done) < THREADS && round < 10000; round++) {
    if (luaretry_policy_load_string(handles[1], "=rate", POLICY) != LUARETRY_OK ||
        luaretry_policy_set(handles[1], "rate.burst", "1") != LUARETRY_OK)
      atomic_fetch_add(&bad, 1);
    redis_sleep_ms(20);
  }
  return NULL;
}

static int by_time(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The most attempts in any `window` seconds. */
static int most_in(const double *t, int n, double window) {
  int most = 0;
  for (int i = 0, j = 0; i < n; i++) {
    while (t[i] - t[j] > window) j++;
    if (i - j + 1 > most) most = i - j + 1;
  }
  return most;
}

/* The lease's arithmetic (engine/lease.c), as luaretry-policy(5) says it. */
static void lease_rules(void) {
  double tat = 0, b, retry, wait;
  /* a fresh bucket: `burst` slots at once, then one per interval, within
   * the horizon */
  CHECK_EQ_INT(lr_lease_grant(&tat, 100, 10, 3, 5, LR_LEASE_HORIZON, &b, &retry), 5);
  lr_lease l;
  lr_lease_init(&l);
  lr_lease_add(&l, 5, 100, b, 0.1);
  double want[5] = { 0, 0, 0, 0.1, 0.2 };
  for (int j = 0; j < 5; j++) {
    CHECK_EQ_INT(lr_lease_take(&l, 100, -1, &wait), 1);
    CHECK_NEAR(wait, want[j], 1e-9);
  }
  CHECK_EQ_INT(lr_lease_take(&l, 100, -1, &wait), 0);
  /* slots held a horizon ahead: none more, and when one would fit */
  tat = 100 + LR_LEASE_HORIZON + 0.5;
  CHECK_EQ_INT(lr_lease_grant(&tat, 100, 10, 1, 5, LR_LEASE_HORIZON, &b, &retry), 0);
  CHECK_NEAR(retry, 0.5, 1e-9);
  /* a slot past the deadline is kept for another call; one too old to
   * spend is dropped */
  lr_lease_init(&l);
  lr_lease_add(&l, 2, 100, 100.5, 0.1);
  CHECK_EQ_INT(lr_lease_take(&l, 100, 100.2, &wait), -1);
  CHECK_EQ_INT(lr_lease_take(&l, 100.55, -1, &wait), 1);
  CHECK_NEAR(wait, 0, 1e-9);
  CHECK_EQ_INT(lr_lease_take(&l, 100.6 + LR_LEASE_LATE + 0.01, -1, &wait), 0);
  /* blocks: doubled while spent, halved when slots went unspent, at most
   * a tenth of a second of the limit */
  lr_lease_init(&l);
  CHECK_EQ_INT(lr_lease_want(&l, 1000), 1);
  l.used = 1;
  CHECK_EQ_INT(lr_lease_want(&l, 1000), 2);
  l.used = 2;
  CHECK_EQ_INT(lr_lease_want(&l, 1000), 4);
  l.used = 2, l.dropped = 2;
  CHECK_EQ_INT(lr_lease_want(&l, 1000), 2);
  for (int k = 0; k < 20; k++) l.used = l.want, lr_lease_want(&l, 1000);
  CHECK_EQ_INT(l.want, LR_LEASE_MAX);
  l.used = l.want;
  CHECK_EQ_INT(lr_lease_want(&l, 30), 3);
  CHECK_EQ_INT(lr_lease_want(&l, 5), 1);
  /* many processes asking blocks at random moments: in any T seconds the
   * fleet's slot times number at most limit * T + burst */
  double times[4000];
  int n = 0;
  tat = 0;
  uint64_t x = 12345;
  for (double now = 0; now < 20 && n < 3900;) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    now += (double)(x % 1000) / 20000; /* 0 to 50 ms apart */
    long got = lr_lease_grant(&tat, now, 40, 4, 1 + (long)(x % 7), LR_LEASE_HORIZON, &b, &retry);
    for (long j = 0; j < got; j++) times[n++] = b + (double)j / 40 > now ? b + (double)j / 40 : now;
  }
  qsort(times, (size_t)n, sizeof times[0], by_time);
  CHECK(n > 700);
  CHECK(most_in(times, n, 2.0) <= 40 * 2 + 4 + 1); /* + 1: a closed window */
}

int main(void) {
  lease_rules();
  redis_srv srv;
  if (redis_start(&srv, (const char *)NULL) != 0) return 1;
  char url[100];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", srv.port);
  for (int h = 0; h < HANDLES; h++) {
    CHECK_CODE(luaretry_policy_new(&handles[h]), LUARETRY_OK);
    CHECK_CODE(luaretry_policy_set(handles[h], "fleet.redis", url), LUARETRY_OK);
    CHECK_CODE(luaretry_policy_set(handles[h], "fleet.command_timeout", "2000"), LUARETRY_OK);
    CHECK_CODE(luaretry_policy_load_string(handles[h], "=rate", POLICY), LUARETRY_OK);
  }
  pthread_t t[THREADS + 1];
  for (long i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, caller, (void *)i);
  pthread_create(&t[THREADS], NULL, reloader, NULL);
  for (int i = 0; i <= THREADS; i++) pthread_join(t[i], NULL);
  CHECK_EQ_INT((long)atomic_load(&bad), 0);
  int n = atomic_load(&recorded);
  CHECK_EQ_INT((long)n, (long)THREADS * CALLS);
  qsort(moments, (size_t)n, sizeof moments[0], by_time);
  int most = most_in(moments, n, 1.0);
  double span = moments[n - 1] - moments[0];
  printf("fleet rate: at most %d attempts in any second (bound %d); %d over %.3f s: %.1f/s\n", most,
         LIMIT + 1 + HANDLES * BLOCK, n, span, (n - 1) / span);
  CHECK(most <= LIMIT + 1 + HANDLES * BLOCK);
  CHECK(most > LIMIT / 2);
  /* one limit for all: (n - 1) / LIMIT seconds at least, less the burst
   * and the blocks held at the start */
  CHECK(span >= (double)(n - 1 - HANDLES * BLOCK) / LIMIT);
  redisReply *r = redis_cmd(&srv, "HGET luaretry:{fleet-rate-threads}:rate cfg");
  CHECK(r && r->type == REDIS_REPLY_STRING);
  if (r && r->type == REDIS_REPLY_STRING) CHECK_EQ_STR(r->str, "rate.limit=50 rate.burst=1");
  if (r) freeReplyObject(r);
  for (int h = 0; h < HANDLES; h++) luaretry_policy_free(handles[h]);
  redis_stop(&srv);
  return check_done();
}
