/* test_fleet_local.c: the local store (core/fleet/local_store.h): two
 * handles share the guards through the file; what is refused is never
 * used; and writers SIGKILLed at random points leave the others going
 * and every count within its bounds. */
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "local_store.h"

static char dir[64];

static void settings(lr_fleet_settings *s) {
  lr_fleet_settings_init(s);
  s->budget = 1, s->max_tokens = 10, s->token_ratio = 0.5;
  s->breaker = 1, s->failures = 5, s->open_seconds = 60, s->probes = 2;
  s->throttle = 1, s->throttle_k = 2, s->throttle_window = 60, s->throttle_cost = 1;
  s->rate = 1, s->rate_limit = 100, s->rate_burst = 1;
}

static lr_local *open_store(const char *key, char *err, size_t errlen) {
  lr_fleet_settings s;
  settings(&s);
  lr_local *l = NULL;
  err[0] = '\0';
  CHECK_EQ_INT(lr_local_new(dir, key, &s, &l, err, errlen), LR_FLEET_OK);
  return l;
}

static const lr_remote_ops *ops = &lr_local_remote_ops;

static void test_shared(void) {
  char err[600];
  lr_local *a = open_store("shared", err, sizeof err), *b = open_store("shared", err, sizeof err);
  CHECK_EQ_STR(err, "");
  lr_local_status st;
  lr_local_status_get(a, &st);
  CHECK(st.usable);
  struct stat sb;
  CHECK(stat(st.path, &sb) == 0 && (sb.st_mode & 0777) == 0600);
  CHECK(strncmp(st.path, dir, strlen(dir)) == 0);
  double now = lr_monotonic_now();
  CHECK_NEAR(ops->tokens(b), 10, 1e-9);
  for (int i = 0; i < 4; i++) ops->record(a, LR_REMOTE_FAILURE, now);
  CHECK_NEAR(ops->tokens(b), 6, 1e-9); /* a's failures spent b's budget */
  CHECK_EQ_INT(ops->budget_allows_retry(b, now), 1);
  ops->record(a, LR_REMOTE_FAILURE, now); /* the fifth in a row: open */
  CHECK_EQ_INT(ops->breaker_admits(b, 1, now, 0, NULL), 0);
  CHECK_EQ_INT(ops->budget_allows_retry(b, now), 0); /* 5 of 10: not more than half */
  ops->record(b, LR_REMOTE_SUCCESS, now);
  CHECK_NEAR(ops->tokens(a), 5.5, 1e-9);
  ops->spend(b, now); /* a hedge's token, and the throttling answer's cost */
  ops->record(a, LR_REMOTE_THROTTLED, now);
  CHECK_NEAR(ops->tokens(a), 3.5, 1e-9);
  ops->spend(b, now), ops->spend(b, now), ops->spend(b, now), ops->spend(b, now);
  CHECK_NEAR(ops->tokens(a), 0, 1e-9); /* never below 0 */
  ops->record(b, LR_REMOTE_SUCCESS, now);
  CHECK_NEAR(ops->tokens(a), 0.5, 1e-9);
  /* the open period over: half-open, two permits for first attempts */
  CHECK_EQ_INT(ops->breaker_admits(a, 1, now + 61, 0, NULL), LR_REMOTE_PERMIT);
  CHECK_EQ_INT(ops->breaker_admits(b, 1, now + 61, 0, NULL), LR_REMOTE_PERMIT);
  CHECK_EQ_INT(ops->breaker_admits(b, 1, now + 61, 0, NULL), 0);
  ops->permit_give_back(a); /* a's attempt refused by a later guard */
  CHECK_EQ_INT(ops->breaker_admits(b, 1, now + 61, 0, NULL), LR_REMOTE_PERMIT);
  ops->permit_give_back(a), ops->permit_give_back(a), ops->permit_give_back(a);
  lr_local_status_get(a, &st);
  CHECK_EQ_INT(st.probes_left, 2); /* never beyond `probes` */
  CHECK_EQ_INT(ops->breaker_admits(b, 1, now + 61, 0, NULL), LR_REMOTE_PERMIT);
  CHECK_EQ_INT(ops->breaker_admits(b, 1, now + 61, 0, NULL), LR_REMOTE_PERMIT);
  CHECK_EQ_INT(ops->breaker_admits(b, 1, now + 61, 0, NULL), 0);
  CHECK_EQ_INT(ops->breaker_admits(b, 0, now + 61, 0, NULL), 1); /* a retry goes on */
  ops->record(a, LR_REMOTE_SUCCESS, now + 61);
  ops->throttle_accept(a, now + 61); /* its request's accept, as guard_admission.c counts it */
  CHECK_EQ_INT(ops->breaker_admits(b, 1, now + 61, 0, NULL), 1); /* closed */
  /* the admission window: a's requests, b's accepts */
  for (int i = 0; i < 32; i++) ops->throttle_request(a, now + 61);
  ops->throttle_unrequest(b, now + 61), ops->throttle_unrequest(a, now + 61); /* refused later */
  ops->record(b, LR_REMOTE_SUCCESS, now + 61); /* the budget's and breaker's: no accept */
  CHECK_NEAR(ops->throttle_refusal(b, now + 61), (30 - 2 * 1) / 31.0, 1e-9);
  ops->throttle_accept(b, now + 61);
  CHECK_NEAR(ops->throttle_refusal(b, now + 61), (30 - 2 * 2) / 31.0, 1e-9);
  ops->throttle_unrequest(a, now + 122); /* a bucket since moved on: nothing */
  CHECK_NEAR(ops->throttle_refusal(b, now + 61), (30 - 2 * 2) / 31.0, 1e-9);
  /* a window later, all of it is gone */
  CHECK_NEAR(ops->throttle_refusal(b, now + 122), 0, 1e-9);
  /* the rate limiter: one GCRA for both, 100/s */
  double wait = 0, t = lr_monotonic_now();
  CHECK_EQ_INT(ops->rate_reserve(a, t, t, -1, 0, 0, NULL, &wait), 1);
  CHECK_NEAR(wait, 0, 0.002);
  CHECK_EQ_INT(ops->rate_reserve(b, t, t, -1, 0, 0, NULL, &wait), 1);
  CHECK_NEAR(wait, 0.01, 0.002);
  CHECK_EQ_INT(ops->rate_reserve(a, t, t, t + 0.005, 0, 0, NULL, &wait), 1);
  CHECK(wait < 0); /* after `latest`: nothing held */
  CHECK_EQ_INT(ops->rate_reserve(a, t, t, -1, 0, 0, NULL, &wait), 1);
  CHECK_NEAR(wait, 0.02, 0.002);
  /* reset: everything afresh, for both */
  CHECK_EQ_INT(lr_local_reset(a, err, sizeof err), LR_FLEET_OK);
  lr_local_status_get(b, &st);
  CHECK_NEAR(st.tokens, 10, 1e-9);
  CHECK_EQ_INT(st.breaker, 0);
  CHECK_NEAR(st.requests, 0, 1e-9);
  CHECK_NEAR(st.window_seconds, 60, 1e-9);
  CHECK_NEAR(st.rate_ahead, 0, 1e-9);
  CHECK_NEAR(st.rate_limit, 100, 1e-9);
  unlink(st.path);
  lr_local_free(a);
  lr_local_free(b);
}

/* The breaker's rate rules over both handles' outcomes: a window of the
 * last 10, opened when half of them failed (failure_rate 0.5). */
static void test_rate_window(void) {
  lr_fleet_settings s;
  settings(&s);
  s.failures = 1000, s.window = 10, s.min_calls = 10, s.failure_rate = 0.5;
  char err[600];
  lr_local *a = NULL, *b = NULL;
  CHECK_EQ_INT(lr_local_new(dir, "rated", &s, &a, err, sizeof err), LR_FLEET_OK);
  CHECK_EQ_INT(lr_local_new(dir, "rated", &s, &b, err, sizeof err), LR_FLEET_OK);
  double now = lr_monotonic_now();
  /* the last 4 of 10 failed: closed; one more failure, the first (a
   * success) slides out: 5 of the last 10, open */
  for (int i = 0; i < 10; i++) ops->breaker_record(i % 2 ? a : b, i >= 6, 0, now);
  CHECK_EQ_INT(ops->breaker_admits(a, 1, now, 0, NULL), 1);
  ops->breaker_record(b, 1, 0, now);
  lr_local_status st;
  lr_local_status_get(a, &st);
  CHECK_EQ_INT(st.breaker, LUARETRY_BREAKER_OPEN);
  CHECK_EQ_INT(ops->breaker_admits(b, 1, now, 0, NULL), 0);
  /* half-open, a probe's success closes it: the window starts afresh, so
   * one more failure does not reopen it */
  CHECK_EQ_INT(ops->breaker_admits(b, 1, now + 61, 0, NULL), LR_REMOTE_PERMIT);
  ops->record(b, LR_REMOTE_SUCCESS, now + 61);
  ops->breaker_record(a, 1, 0, now + 61);
  CHECK_EQ_INT(ops->breaker_admits(a, 1, now + 61, 0, NULL), 1);
  unlink(st.path);
  lr_local_free(a);
  lr_local_free(b);
}

/* A throttling answer is neutral to the breaker (luaretry-policy(5), as
 * Redis's script and the local guards): it costs budget.throttle_cost and
 * neither ends a run of failures nor closes a half-open breaker. */
static void test_throttled_neutral(void) {
  lr_fleet_settings s;
  settings(&s);
  s.failures = 2, s.probes = 1;
  char err[600];
  lr_local *a = NULL;
  CHECK_EQ_INT(lr_local_new(dir, "neutral", &s, &a, err, sizeof err), LR_FLEET_OK);
  double now = lr_monotonic_now();
  ops->record(a, LR_REMOTE_FAILURE, now); /* 503, 429, 503: open */
  ops->record(a, LR_REMOTE_THROTTLED, now);
  CHECK_NEAR(ops->tokens(a), 10 - 1 - 1, 1e-9); /* the 429's cost */
  ops->record(a, LR_REMOTE_FAILURE, now);
  lr_local_status st;
  lr_local_status_get(a, &st);
  CHECK_EQ_INT(st.breaker, LUARETRY_BREAKER_OPEN);
  CHECK_EQ_INT(st.consecutive_failures, 2);
  CHECK_EQ_INT(ops->breaker_admits(a, 1, now, 0, NULL), 0);
  /* half-open: the probe's 429 leaves it half-open, its permit spent */
  CHECK(ops->breaker_admits(a, 1, now + 61, 0, NULL) > 0);
  ops->record(a, LR_REMOTE_THROTTLED, now + 61);
  lr_local_status_get(a, &st);
  CHECK_EQ_INT(st.breaker, LUARETRY_BREAKER_HALF_OPEN);
  CHECK_EQ_INT(ops->breaker_admits(a, 1, now + 61, 0, NULL), 0);
  /* a success closes it, and a 429 after two failures still opens nothing */
  ops->record(a, LR_REMOTE_SUCCESS, now + 61);
  ops->record(a, LR_REMOTE_FAILURE, now + 61);
  ops->record(a, LR_REMOTE_THROTTLED, now + 61);
  lr_local_status_get(a, &st);
  CHECK_EQ_INT(st.breaker, LUARETRY_BREAKER_CLOSED);
  CHECK_EQ_INT(st.consecutive_failures, 1);
  unlink(st.path);
  lr_local_free(a);
}

/* ---- processes with other guard settings (a rolling update) */

static struct {
  int n;
  char line[3][1200];
} heard;

static void on_log(void *ud, const char *line) {
  (void)ud;
  if (heard.n < 3) lr_strlcpy(heard.line[heard.n], line, sizeof heard.line[0]);
  heard.n++;
}

static lr_local *with_tokens(double max_tokens) {
  lr_fleet_settings s;
  settings(&s);
  s.max_tokens = max_tokens;
  s.log = on_log;
  char err[600];
  lr_local *l = NULL;
  CHECK_EQ_INT(lr_local_new(dir, "settings", &s, &l, err, sizeof err), LR_FLEET_OK);
  return l;
}

/* In a child: what fn says of a handle with max_tokens 10 (its exit). */
static int in_child(int (*fn)(lr_local *l)) {
  pid_t pid = fork();
  if (pid == 0) {
    lr_local *l = with_tokens(10);
    int ok = fn(l);
    lr_local_free(l);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) == 0 : 0;
}

static int three_failures(lr_local *l) {
  for (int i = 0; i < 3; i++) ops->record(l, LR_REMOTE_FAILURE, lr_monotonic_now());
  return ops->budget_allows_retry(l, 0) == 1; /* 7 of 10 */
}

static int refused(lr_local *l) { return ops->budget_allows_retry(l, 0) == LR_REMOTE_LOCAL; }

/* A reload to max_tokens 1000 by the process that used the store last. */
static int reload(lr_local *l) {
  double now = lr_monotonic_now();
  ops->record(l, LR_REMOTE_SUCCESS, now);
  lr_fleet_settings s;
  settings(&s);
  s.max_tokens = 1000;
  lr_local_configure(l, &s);
  return ops->budget_allows_retry(l, now) == 0; /* 7.5 of 1000: the store's */
}

/* As Redis refuses a process whose settings differ (LUARETRY_SETTINGS), the
 * store: a process with max_tokens 1000 decides with its local guards, said
 * once, while the store is the settings of one with 10 (it clamped the
 * count to 10: the other would refuse every retry). */
static void test_settings_differ(void) {
  heard.n = 0;
  CHECK(in_child(three_failures));
  lr_local *b = with_tokens(1000);
  double now = lr_monotonic_now();
  CHECK_EQ_INT(ops->budget_allows_retry(b, now), LR_REMOTE_LOCAL);
  CHECK_EQ_INT(ops->breaker_admits(b, 1, now, 0, NULL), LR_REMOTE_LOCAL);
  CHECK(ops->throttle_request(b, now) == LR_REMOTE_LOCAL);
  ops->record(b, LR_REMOTE_FAILURE, now); /* not counted in the store */
  CHECK_EQ_INT(heard.n, 1);
  CHECK_CONTAINS(heard.line[0], "fleet guards (local): ");
  CHECK_CONTAINS(heard.line[0], ": the key is shared with other settings (theirs: process ");
  CHECK_CONTAINS(heard.line[0], "'s, used 0 s ago; ours: budget=1 max_tokens=1000.000 ");
  CHECK_CONTAINS(
    heard.line[0],
    "give this policy a fleet.key of its own, or reset the fleet; local guards decide");
  lr_local_status st;
  lr_local_status_get(b, &st);
  CHECK(st.usable);
  CHECK_CONTAINS(st.detail, "the key is shared with other settings");
  /* the store's settings, in another handle: used, the count 7 of 10 */
  lr_local *c = with_tokens(10);
  CHECK_EQ_INT(ops->budget_allows_retry(c, now), 1);
  CHECK_NEAR(ops->tokens(c), 7, 1e-9);
  lr_local_free(c);
  /* the process that used it last reloads with 1000: its settings take
   * it, and b's next outcome says the store is back */
  CHECK(in_child(reload));
  CHECK_EQ_INT(ops->budget_allows_retry(b, now), 0); /* 7.5 of 1000 */
  ops->record(b, LR_REMOTE_ANSWERED, now + 1);
  CHECK_EQ_INT(heard.n, 2);
  CHECK_CONTAINS(heard.line[1], ": back, machine-wide again");
  /* 10 now refused while a process used 1000 within the minute (b, seen
   * from a child; another pid, seen from here), and taken once unused
   * that long */
  CHECK(in_child(refused));
  c = with_tokens(10);
  uint32_t s_now = (uint32_t)(lr_monotonic_coarse_ms() / 1000);
  uint64_t other = (uint64_t)(uint32_t)(getpid() + 1) << 32;
  atomic_store(&c->map->cfg_seen, other | s_now);
  CHECK_EQ_INT(ops->budget_allows_retry(c, now), LR_REMOTE_LOCAL);
  atomic_store(&c->map->cfg_seen, other | (uint32_t)(s_now - 61));
  CHECK_EQ_INT(ops->budget_allows_retry(c, now), 1); /* 7.5 of 10 */
  CHECK_EQ_INT(heard.n, 4);                          /* c's refusal, then c's back */
  /* a reset: any settings may take the store */
  char err[600];
  CHECK_EQ_INT(lr_local_reset(c, err, sizeof err), LR_FLEET_OK);
  CHECK_EQ_INT(ops->budget_allows_retry(b, now), 1);
  CHECK_NEAR(ops->tokens(b), 1000, 1e-9);
  lr_local_status_get(b, &st);
  unlink(st.path);
  lr_local_free(c);
  lr_local_free(b);
}

/* ---- what a later guard refuses is handed back to the store too, through
 * a policy's calls (the public step API, the real clock) */

static luaretry_policy *store_policy(const char *src, const char *key) {
  luaretry_policy *p = NULL;
  luaretry_policy_new(&p);
  CHECK_CODE(luaretry_policy_set(p, "fleet.local", dir), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_set(p, "fleet.key", key), LUARETRY_OK);
  if (!CHECK_CODE(luaretry_policy_load_string(p, "=giveback", src), LUARETRY_OK))
    fprintf(stderr, "%s\n", luaretry_policy_errmsg(p));
  return p;
}

/* One call: its first attempt answered `status`; the decision after it. */
static luaretry_decision one_call(luaretry_policy *p, int status) {
  luaretry_call *c = NULL;
  luaretry_decision d;
  memset(&d, 0, sizeof d);
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
  CHECK_CODE(luaretry_call_next(c, &d), LUARETRY_OK);
  if (d.retry) {
    luaretry_outcome o;
    luaretry_outcome_init(&o);
    o.status = status;
    CHECK_CODE(luaretry_call_report(c, &o, &d), LUARETRY_OK);
  }
  luaretry_call_free(c);
  return d;
}

/* The store's file of `key`, mapped by a handle of its own. */
static lr_local *peek(const char *key) {
  char err[600];
  lr_local *l = open_store(key, err, sizeof err);
  CHECK(l && l->map);
  return l;
}

static double window_requests(lr_local *l) {
  double n = 0;
  for (int i = 0; l->map && i < LR_LOCAL_BUCKETS; i++)
    n += (double)(atomic_load(&l->map->requests[i]) & 0xffffff);
  return n;
}

/* Admission counts a retry when it is asked about; the budget then
 * refuses it: uncounted in the store as in the process (20 successes, 5
 * failures whose retries the budget refuses: 25 requests, not 30). */
static void test_request_given_back(void) {
  luaretry_policy *p = store_policy(
    "max_attempts = 3\ndeadline = 30\nattempt_timeout = 5\n"
    "budget = { max_tokens = 2, token_ratio = 0.001 }\n"
    "admission = { k = 1000, window = 60 }\n",
    "unrequest");
  for (int i = 0; i < 20; i++) CHECK_EQ_INT(one_call(p, 200).retry, 0);
  for (int i = 0; i < 5; i++) CHECK_EQ_INT(one_call(p, 503).reason, LUARETRY_REASON_BUDGET);
  lr_local *l = peek("unrequest");
  CHECK_NEAR(window_requests(l), 25, 1e-9);
  lr_local_status st;
  lr_local_status_get(l, &st);
  unlink(st.path);
  lr_local_free(l);
  luaretry_policy_free(p);
}

/* A half-open permit taken from the store for a call the rate limiter
 * then refuses goes back to the store: the next call gets it (it was
 * refused circuit_open until the open period passed again). */
static void test_permit_given_back(void) {
  luaretry_policy *p = store_policy(
    "max_attempts = 2\ndeadline = 5\nattempt_timeout = 2\n"
    "breaker = { failures = 1, open_seconds = 1, probes = 1 }\n"
    "rate = { limit = 0.1, burst = 1 }\n",
    "permit");
  /* its token taken (the next comes in 10 s, past any deadline), its
   * failure opens the breaker, which refuses its retry and the next call */
  CHECK_EQ_INT(one_call(p, 503).reason, LUARETRY_REASON_CIRCUIT_OPEN);
  CHECK_EQ_INT(one_call(p, 503).reason, LUARETRY_REASON_CIRCUIT_OPEN);
  nanosleep(&(struct timespec){ 1, 100 * 1000 * 1000 }, NULL); /* half-open */
  for (int i = 0; i < 3; i++) /* each takes the one permit, and hands it back */
    CHECK_EQ_INT(one_call(p, 503).reason, LUARETRY_REASON_RATE_LIMIT);
  lr_local *l = peek("permit");
  lr_local_status st;
  lr_local_status_get(l, &st);
  CHECK_EQ_INT(st.breaker, LUARETRY_BREAKER_HALF_OPEN);
  CHECK_EQ_INT(st.probes_left, 1);
  unlink(st.path);
  lr_local_free(l);
  luaretry_policy_free(p);
}

/* A call on the virtual clock never reaches the store (policy/calls.c: its
 * counts are not real, and its times, near 0, are not CLOCK_MONOTONIC's):
 * the store's breaker word and budget stay untouched by its failures; a
 * real call's failure opens it, at a time of CLOCK_MONOTONIC. */
static void test_virtual_calls_stay_out(void) {
  luaretry_policy *p = store_policy(
    "max_attempts = 3\ndeadline = 30\nattempt_timeout = 5\n"
    "budget = { max_tokens = 10, token_ratio = 0.1 }\n"
    "breaker = { failures = 1, open_seconds = 60 }\n",
    "virtual");
  luaretry_call_options o;
  luaretry_call_options_init(&o);
  o.flags = LUARETRY_CALL_VIRTUAL_TIME | LUARETRY_CALL_SEED;
  o.seed = 1;
  for (int i = 0; i < 3; i++) {
    luaretry_call *c = NULL;
    luaretry_decision d;
    CHECK_CODE(luaretry_call_begin(p, &o, &c), LUARETRY_OK);
    CHECK_CODE(luaretry_call_next(c, &d),
               LUARETRY_OK); /* the policy's breaker opens at the first */
    luaretry_outcome out;
    luaretry_outcome_init(&out);
    out.status = 503;
    if (d.retry) CHECK_CODE(luaretry_call_report(c, &out, &d), LUARETRY_OK);
    luaretry_call_free(c);
  }
  lr_local *l = peek("virtual");
  CHECK_EQ_INT(atomic_load(&l->map->breaker), 0);
  CHECK_EQ_INT(atomic_load(&l->map->tokens), -1); /* full, as made */
  double before = lr_monotonic_now();
  CHECK_EQ_INT(one_call(p, 503).reason, LUARETRY_REASON_CIRCUIT_OPEN);
  lr_local_status st;
  lr_local_status_get(l, &st);
  CHECK_EQ_INT(st.breaker, LUARETRY_BREAKER_OPEN);
  CHECK(st.opened_ago >= 0 && st.opened_ago <= lr_monotonic_now() - before + 0.02);
  unlink(st.path);
  lr_local_free(l);
  luaretry_policy_free(p);
}

/* A refused file: the handle answers "local" to every question. */
static void expect_refused(const char *key, const char *why) {
  char err[600];
  lr_local *l = open_store(key, err, sizeof err);
  CHECK_CONTAINS(err, why);
  double w;
  CHECK_EQ_INT(ops->budget_allows_retry(l, 0), LR_REMOTE_LOCAL);
  CHECK_EQ_INT(ops->breaker_admits(l, 1, 0, 0, NULL), LR_REMOTE_LOCAL);
  CHECK(ops->throttle_request(l, 0) == LR_REMOTE_LOCAL);
  CHECK_EQ_INT(ops->rate_reserve(l, 0, 0, -1, 0, 0, NULL, &w), LR_REMOTE_LOCAL);
  ops->record(l, LR_REMOTE_FAILURE, 0);
  lr_local_free(l);
}

static void path_of(const char *key, char *out, size_t size) {
  char err[600];
  lr_local *l = open_store(key, err, sizeof err);
  lr_local_status st;
  lr_local_status_get(l, &st);
  lr_strlcpy(out, st.path, size);
  lr_local_free(l);
}

static void write_file(const char *path, const char *bytes, size_t n) {
  unlink(path);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0 && write(fd, bytes, n) == (ssize_t)n);
  close(fd);
}

static void test_refused(void) {
  char path[4200], garbage[sizeof(lr_local_file)];
  path_of("bad", path, sizeof path);
  write_file(path, "short", 5); /* truncated */
  expect_refused("bad", "of another size");
  memset(garbage, 'x', sizeof garbage); /* the right size, garbage */
  write_file(path, garbage, sizeof garbage);
  expect_refused("bad", "not a luaretry fleet store");
  chmod(path, 0644);
  expect_refused("bad", "others may read or write it");
  chmod(path, 0600);
  if (getuid() == 0 && chown(path, 65534, 65534) == 0) /* root can make it another user's */
    expect_refused("bad", "owned by another user");
  /* reset removes a refused file; the next handle makes a new one */
  char err[600];
  lr_local *l = open_store("bad", err, sizeof err);
  CHECK_EQ_INT(lr_local_reset(l, err, sizeof err), LR_FLEET_OK);
  CHECK_CONTAINS(err, "removed");
  CHECK_EQ_INT(ops->budget_allows_retry(l, 0), LR_REMOTE_LOCAL); /* this one stays refused */
  lr_local_free(l);
  l = open_store("bad", err, sizeof err);
  CHECK_EQ_STR(err, "");
  CHECK_EQ_INT(ops->budget_allows_retry(l, 0), 1);
  lr_local_free(l);
  unlink(path);
  char target[300];
  lr_fmt(target, sizeof target, "%s/elsewhere", dir);
  write_file(target, garbage, sizeof garbage);
  CHECK(symlink(target, path) == 0);
  expect_refused("bad", "a symbolic link");
  unlink(path);
  unlink(target);
  /* a folder others may write to */
  char open_dir[300];
  lr_fmt(open_dir, sizeof open_dir, "%s/open", dir);
  CHECK(mkdir(open_dir, 0700) == 0 && chmod(open_dir, 0777) == 0);
  lr_fleet_settings s;
  settings(&s);
  err[0] = '\0';
  CHECK_EQ_INT(lr_local_new(open_dir, "k", &s, &l, err, sizeof err), LR_FLEET_OK);
  CHECK_CONTAINS(err, "others may write to it");
  CHECK_EQ_INT(ops->budget_allows_retry(l, 0), LR_REMOTE_LOCAL);
  CHECK_EQ_INT(lr_local_reset(l, err, sizeof err), LR_FLEET_E_REFUSED); /* a folder: kept */
  lr_local_free(l);
  rmdir(open_dir);
}

/* ---- a file cut while it is made or opened (another process of the
 * user truncating it): the store's calls to posix_fallocate and fstat
 * land here (this program links the library statically), and cut the
 * file right after theirs when told to.  A fault would kill the process:
 * each case runs in a child. */

static int cut_after_fallocate, cut_after_fstat;

int posix_fallocate(int fd, off_t offset, off_t len) {
  static int (*real)(int, off_t, off_t);
  if (!real) real = (int (*)(int, off_t, off_t))dlsym(RTLD_NEXT, "posix_fallocate");
  int rc = real(fd, offset, len);
  if (rc == 0 && cut_after_fallocate) {
    cut_after_fallocate = 0;
    if (ftruncate(fd, 0) != 0) rc = errno;
  }
  return rc;
}

int fstat(int fd, struct stat *st) {
  static int (*real)(int, struct stat *);
  if (!real) real = (int (*)(int, struct stat *))dlsym(RTLD_NEXT, "fstat");
  int rc = real(fd, st);
  if (rc == 0 && cut_after_fstat && S_ISREG(st->st_mode)) {
    cut_after_fstat = 0;
    if (ftruncate(fd, 0) != 0) rc = -1;
  }
  return rc;
}

/* Cut between its blocks' allocation and its contents: made whole all
 * the same (written, never mapped, while it is made).  Cut between the
 * open's size check and the reads its checks make: refused as of another
 * size (the checks read a copy). */
static int cut_while_opened(void) {
  char err[600], path[4200];
  cut_after_fallocate = 1;
  lr_local *l = open_store("cut", err, sizeof err);
  int made = !cut_after_fallocate && err[0] == '\0' && ops->budget_allows_retry(l, 0) == 1;
  if (!made) fprintf(stderr, "cut after its allocation: %s\n", err);
  lr_local_status st;
  lr_local_status_get(l, &st);
  lr_strlcpy(path, st.path, sizeof path);
  lr_local_free(l);
  cut_after_fstat = 1;
  l = open_store("cut", err, sizeof err);
  int refused = !cut_after_fstat && strstr(err, "of another size") != NULL &&
                ops->budget_allows_retry(l, 0) == LR_REMOTE_LOCAL;
  if (!refused) fprintf(stderr, "cut after its size check: %s\n", err);
  lr_local_free(l);
  unlink(path);
  return made && refused;
}

static void test_cut_while_opened(void) {
  pid_t pid = fork();
  if (pid == 0) _exit(cut_while_opened() ? 0 : 1);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (WIFSIGNALED(status))
    fprintf(stderr, "cut_while_opened: killed by signal %d\n", WTERMSIG(status));
}

/* No room for the file (a full disk or tmpfs, here a file size limit of
 * 100 bytes, in a child): refused, nothing left behind. */
static void test_full(void) {
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit r = { 100, 100 };
    setrlimit(RLIMIT_FSIZE, &r);
    char err[600];
    lr_local *l = open_store("full", err, sizeof err);
    int ok =
      strstr(err, "no room for it") != NULL && ops->budget_allows_retry(l, 0) == LR_REMOTE_LOCAL;
    lr_local_free(l);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  DIR *d = opendir(dir);
  int files = 0;
  for (struct dirent *e; d && (e = readdir(d));) files += e->d_name[0] != '.';
  if (d) closedir(d);
  CHECK_EQ_INT(files, 0); /* not even the temporary file */
}

/* Keys that are not file names: each a file in the folder itself. */
static void test_keys(void) {
  char *long_key = malloc(10001);
  memset(long_key, 'k', 10000);
  long_key[10000] = '\0';
  const char *keys[] = { "../../etc/passwd", "a/b", "..", long_key, "with space\n" };
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
    char path[4200];
    path_of(keys[i], path, sizeof path);
    const char *slash = strrchr(path, '/');
    CHECK(slash && (size_t)(slash - path) == strlen(dir) && strncmp(path, dir, strlen(dir)) == 0);
    CHECK(strstr(path, "..") == NULL);
    struct stat sb;
    CHECK(lstat(path, &sb) == 0 && S_ISREG(sb.st_mode));
    unlink(path);
  }
  free(long_key);
}

/* ---- crash safety */

#define WRITERS 4
#define KILLS   40

typedef struct {
  volatile long long progress[WRITERS];
} board;

static void writer(board *bd, int i) {
  char err[600];
  lr_local *l = open_store("crash", err, sizeof err);
  unsigned seed = (unsigned)getpid();
  for (;;) {
    double now = lr_monotonic_now(), w;
    switch (rand_r(&seed) % 7) {
    case 0: ops->record(l, LR_REMOTE_FAILURE, now); break;
    case 1: ops->record(l, LR_REMOTE_SUCCESS, now); break;
    case 2: ops->breaker_admits(l, 1, now, 0, NULL); break;
    case 3: ops->throttle_request(l, now); break;
    case 4: ops->rate_reserve(l, now, now, now + 0.001, 0, 0, NULL, &w); break;
    case 5: ops->breaker_record(l, rand_r(&seed) % 2, 0, now); break;
    default: ops->spend(l, now); break;
    }
    bd->progress[i]++;
  }
}

static pid_t spawn(board *bd, int i) {
  pid_t pid = fork();
  if (pid == 0) {
    writer(bd, i);
    _exit(0);
  }
  return pid;
}

static int invariants_hold(lr_local *l) {
  lr_local_file *m = l->map;
  long long t = atomic_load(&m->tokens);
  uint64_t b = atomic_load(&m->breaker);
  int ok = t == -1 || (t >= 0 && t <= 10000);
  ok = ok && (b & 3) <= 2 && (b >> 18 & 0x3fff) <= 2;
  for (int i = 0; i < LR_LOCAL_BLOCKS; i++) { /* failures and slow ones within the outcomes */
    uint64_t x = atomic_load(&m->blocks[i]), n = x >> 24 & 0xfff;
    ok = ok && (x >> 12 & 0xfff) <= n && (x & 0xfff) <= n;
  }
  return ok;
}

/* Every live writer counts on within a second of a kill. */
static int others_go_on(board *bd, int killed) {
  long long before[WRITERS];
  for (int i = 0; i < WRITERS; i++) before[i] = bd->progress[i];
  for (int tries = 0; tries < 100; tries++) {
    int all = 1;
    for (int i = 0; i < WRITERS; i++)
      if (i != killed && bd->progress[i] == before[i]) all = 0;
    if (all) return 1;
    nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
  }
  return 0;
}

static void test_crash(void) {
  board *bd = mmap(NULL, sizeof *bd, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (!CHECK(bd != MAP_FAILED)) return;
  memset(bd, 0, sizeof *bd);
  char err[600];
  lr_local *l = open_store("crash", err, sizeof err);
  pid_t pid[WRITERS];
  for (int i = 0; i < WRITERS; i++) pid[i] = spawn(bd, i);
  unsigned seed = 42;
  int stuck = 0, broken = 0;
  for (int k = 0; k < KILLS; k++) {
    nanosleep(&(struct timespec){ 0, (long)(rand_r(&seed) % 20000) * 1000 }, NULL);
    int i = (int)(rand_r(&seed) % WRITERS);
    kill(pid[i], SIGKILL);
    waitpid(pid[i], NULL, 0);
    if (!invariants_hold(l)) broken++;
    /* this process's own decisions go on at once */
    double now = lr_monotonic_now();
    ops->record(l, LR_REMOTE_FAILURE, now);
    ops->breaker_admits(l, 1, now, 0, NULL);
    if (!others_go_on(bd, i)) stuck++;
    pid[i] = spawn(bd, i);
  }
  for (int i = 0; i < WRITERS; i++) {
    kill(pid[i], SIGKILL);
    waitpid(pid[i], NULL, 0);
  }
  CHECK_EQ_INT(broken, 0);
  CHECK_EQ_INT(stuck, 0);
  CHECK(invariants_hold(l));
  long long total = 0;
  for (int i = 0; i < WRITERS; i++) total += bd->progress[i];
  CHECK(total > KILLS); /* the writers did write */
  lr_local_status st;
  lr_local_status_get(l, &st);
  unlink(st.path);
  lr_local_free(l);
  munmap(bd, sizeof *bd);
}

int main(void) {
  lr_strlcpy(dir, "/tmp/lr-local-XXXXXX", sizeof dir);
  if (!CHECK(mkdtemp(dir) != NULL)) return check_done();
  test_shared();
  test_rate_window();
  test_throttled_neutral();
  test_request_given_back();
  test_permit_given_back();
  test_settings_differ();
  test_virtual_calls_stay_out();
  test_refused();
  test_cut_while_opened();
  test_keys();
  test_full();
  test_crash();
  CHECK(rmdir(dir) == 0); /* nothing left behind */
  return check_done();
}
