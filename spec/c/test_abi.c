/* test_abi.c: the public surface as luaretry.h promises it.
 *
 * - the version macros agree with each other and with luaretry_version();
 * - every public struct keeps the size it has in this major version (the
 *   ABI rule in luaretry.h: new fields take reserved room), so a change
 *   that grows or shrinks one fails here first (sizes for LP64);
 * - the init functions zero every field, reserved room included;
 * - the names of every enum value exist (switches without default);
 * - the field table: names unique, every settable field reads back through
 *   luaretry_policy_get() and takes that text through luaretry_policy_set()
 *   unchanged, and an unknown name is named with a suggestion. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "luaretry_curl.h"

static int all_zero(const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i]) return 0;
  return 1;
}

static void test_version(void) {
  unsigned num = 0;
  const char *v = luaretry_version(&num);
  CHECK_EQ_STR(v, LUARETRY_VERSION);
  CHECK_EQ_INT((long)num, (long)LUARETRY_VERSION_NUM);
  char expect[32];
  snprintf(expect, sizeof expect, "%d.%d.%d", LUARETRY_VERSION_MAJOR, LUARETRY_VERSION_MINOR,
           LUARETRY_VERSION_PATCH);
  CHECK_EQ_STR(LUARETRY_VERSION, expect);
  CHECK(LUARETRY_AT_LEAST_VERSION(0, 2, 0));
  CHECK(!LUARETRY_AT_LEAST_VERSION(LUARETRY_VERSION_MAJOR + 1, 0, 0));
  CHECK(luaretry_version(NULL) == v);
}

static void test_sizes(void) {
#if UINTPTR_MAX == UINT64_MAX
  /* Frozen for major version 0 on LP64: take reserved room, never grow. */
  CHECK_EQ_INT((long)sizeof(luaretry_tuning), 264);
  CHECK_EQ_INT((long)sizeof(luaretry_metrics), 320);
  CHECK_EQ_INT((long)sizeof(luaretry_outcome), 144);
  CHECK_EQ_INT((long)sizeof(luaretry_request), 80);
  CHECK_EQ_INT((long)sizeof(luaretry_response), 80);
  CHECK_EQ_INT((long)sizeof(luaretry_decision), 104);
  CHECK_EQ_INT((long)sizeof(luaretry_call_options), 48);
  CHECK_EQ_INT((long)sizeof(luaretry_header), 16);
  CHECK_EQ_INT((long)sizeof(luaretry_curl_options), 80);
  CHECK_EQ_INT((long)sizeof(luaretry_curl_resume), 56); /* checksum, validator: reserved room */
  CHECK_EQ_INT((long)sizeof(luaretry_curl_result), 176);
  CHECK_EQ_INT((long)sizeof(luaretry_curl_job), 320);
  CHECK_EQ_INT((long)sizeof(luaretry_curl_many_options), 80);
  CHECK_EQ_INT((long)sizeof(luaretry_fleet_status), 720);
  CHECK_EQ_INT((long)sizeof(luaretry_fleet_process), 152);
#endif
}

static void test_inits(void) {
  luaretry_outcome o;
  memset(&o, 0xAB, sizeof o);
  luaretry_outcome_init(&o);
  CHECK(o.retry_after == -1);
  o.retry_after = 0;
  CHECK(all_zero(&o, sizeof o));
  luaretry_request r;
  memset(&r, 0xAB, sizeof r);
  luaretry_request_init(&r);
  CHECK(all_zero(&r, sizeof r));
  luaretry_call_options co;
  memset(&co, 0xAB, sizeof co);
  luaretry_call_options_init(&co);
  CHECK(all_zero(&co, sizeof co));
  luaretry_curl_options cu;
  memset(&cu, 0xAB, sizeof cu);
  luaretry_curl_options_init(&cu);
  CHECK(all_zero(&cu, sizeof cu));
  luaretry_curl_many_options mo;
  memset(&mo, 0xAB, sizeof mo);
  luaretry_curl_many_options_init(&mo);
  CHECK(all_zero(&mo, sizeof mo));
  /* NULL is accepted, as by every destructor */
  luaretry_outcome_init(NULL);
  luaretry_request_init(NULL);
  luaretry_call_options_init(NULL);
}

static void test_names(void) {
  for (int k = LUARETRY_BACKOFF_EXPONENTIAL; k <= LUARETRY_BACKOFF_SCRIPT; k++)
    CHECK(luaretry_backoff_kind_name((luaretry_backoff_kind)k) != NULL);
  CHECK_EQ_STR(luaretry_backoff_kind_name(LUARETRY_BACKOFF_LINEAR), "linear");
  for (int j = LUARETRY_JITTER_NONE; j <= LUARETRY_JITTER_DECORRELATED; j++)
    CHECK(luaretry_jitter_name((luaretry_jitter)j) != NULL);
  CHECK_EQ_STR(luaretry_jitter_name(LUARETRY_JITTER_DECORRELATED), "decorrelated");
  for (int r = LUARETRY_REASON_NONE; r <= LUARETRY_REASON_RATE_LIMIT; r++)
    CHECK(strcmp(luaretry_reason_name((luaretry_reason)r), "unknown") != 0);
  for (int c = LUARETRY_OK; c <= LUARETRY_E_FLEET; c++)
    CHECK(strcmp(luaretry_strerror((luaretry_code)c), "unknown error code") != 0);
  for (int s = LUARETRY_GUARDS_LOCAL; s <= LUARETRY_GUARDS_FALLBACK; s++)
    CHECK(strcmp(luaretry_guards_scope_name((luaretry_guards_scope)s), "unknown") != 0);
  CHECK_EQ_STR(luaretry_guards_scope_name(LUARETRY_GUARDS_FLEET), "fleet");
  /* a value past the last (a host built against a newer header, a stray
   * cast): every name function answers "unknown", never NULL */
  CHECK_EQ_STR(luaretry_backoff_kind_name((luaretry_backoff_kind)(LUARETRY_BACKOFF_SCRIPT + 1)),
               "unknown");
  CHECK_EQ_STR(luaretry_backoff_kind_name((luaretry_backoff_kind)-1), "unknown");
  CHECK_EQ_STR(luaretry_jitter_name((luaretry_jitter)(LUARETRY_JITTER_DECORRELATED + 1)),
               "unknown");
  CHECK_EQ_STR(luaretry_reason_name((luaretry_reason)(LUARETRY_REASON_RATE_LIMIT + 1)), "unknown");
  CHECK_EQ_STR(luaretry_wait_source_name((luaretry_wait_source)(LUARETRY_WAIT_RATE + 1)),
               "unknown");
  CHECK_EQ_STR(
    luaretry_breaker_state_name((luaretry_breaker_state)(LUARETRY_BREAKER_HALF_OPEN + 1)),
    "unknown");
  CHECK_EQ_STR(luaretry_guards_scope_name((luaretry_guards_scope)(LUARETRY_GUARDS_FALLBACK + 1)),
               "unknown");
  CHECK_EQ_STR(luaretry_strerror((luaretry_code)(LUARETRY_E_FLEET + 1)), "unknown error code");
}

static const char *POLICY =
  "max_attempts = 4\n"
  "backoff = { initial = 0.25, max = 10, jitter = \"full\" }\n"
  "budget = { max_tokens = 7 }\n";

/* One check per field of the schema: its length follows the schema's. */
static void test_fields(void) {
  size_t n = luaretry_field_count();
  CHECK(n >= 30);
  CHECK(luaretry_field_at(n) == NULL);
  luaretry_policy *p;
  if (!CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK)) return;
  char buf[64];
  CHECK_CODE(luaretry_policy_get(p, "max_attempts", buf, sizeof buf), LUARETRY_E_STATE);
  CHECK_CODE(luaretry_policy_load_string(p, "=abi", POLICY), LUARETRY_OK);
  int settable = 0;
  for (size_t i = 0; i < n; i++) {
    const luaretry_field *f = luaretry_field_at(i);
    if (!CHECK(f && f->name && f->type && f->doc)) continue;
    for (size_t j = 0; j < i; j++) CHECK(strcmp(luaretry_field_at(j)->name, f->name) != 0);
    if (!f->settable) {
      CHECK_CODE(luaretry_policy_get(p, f->name, buf, sizeof buf), LUARETRY_E_ARG);
      continue;
    }
    settable++;
    if (!CHECK_CODE(luaretry_policy_get(p, f->name, buf, sizeof buf), LUARETRY_OK)) continue;
    if (strcmp(buf, "none") == 0) continue; /* unset: "none" keeps it so */
    /* what get says, set takes, and get says again */
    char again[64];
    if (CHECK_CODE(luaretry_policy_set(p, f->name, buf), LUARETRY_OK) &&
        CHECK_CODE(luaretry_policy_get(p, f->name, again, sizeof again), LUARETRY_OK))
      CHECK_EQ_STR(again, buf);
  }
  CHECK(settable >= 20);
  CHECK_CODE(luaretry_policy_get(p, "max_attempts", buf, sizeof buf), LUARETRY_OK);
  CHECK_EQ_STR(buf, "4");
  CHECK_CODE(luaretry_policy_get(p, "backoff.initial", buf, sizeof buf), LUARETRY_OK);
  CHECK_EQ_STR(buf, "0.25");
  CHECK_CODE(luaretry_policy_get(p, "backoff.jitter", buf, sizeof buf), LUARETRY_OK);
  CHECK_EQ_STR(buf, "full");
  CHECK_CODE(luaretry_policy_get(p, "budget.max_tokens", buf, sizeof buf), LUARETRY_OK);
  CHECK_EQ_STR(buf, "7");
  CHECK_CODE(luaretry_policy_get(p, "breaker.failures", buf, sizeof buf), LUARETRY_OK);
  CHECK_EQ_STR(buf, "none"); /* no breaker declared */
  CHECK_CODE(luaretry_policy_get(p, "deadline", buf, sizeof buf), LUARETRY_OK);
  CHECK_EQ_STR(buf, "none");
  CHECK_CODE(luaretry_policy_get(p, "is_transient", buf, sizeof buf), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_policy_get(p, "no_such_field", buf, sizeof buf), LUARETRY_E_ARG);
  /* the library speaks of the field; only the command line adds --set */
  CHECK_CODE(luaretry_policy_set(p, "backoff.inital", "3"), LUARETRY_E_ARG);
  CHECK_EQ_STR(luaretry_policy_errmsg(p),
               "backoff.inital: unknown name, did you mean backoff.initial?");
  CHECK_CODE(luaretry_policy_set(p, "max_attempts", "0"), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "max_attempts: expected a whole number");
  CHECK(strstr(luaretry_policy_errmsg(p), "--set") == NULL);
  CHECK_CODE(luaretry_policy_set(p, "is_transient", "x"), LUARETRY_E_ARG);
  CHECK_EQ_STR(luaretry_policy_errmsg(p), "is_transient: can only be set in the script");
  /* the fleet's rows: defaults, the key from the name, a URL never shown
   * with its password (setting it makes no I/O: nothing listens there) */
  CHECK_CODE(luaretry_policy_get(p, "fleet.sync", buf, sizeof buf), LUARETRY_OK);
  CHECK_EQ_STR(buf, "200");
  CHECK_CODE(luaretry_policy_get(p, "fleet.key", buf, sizeof buf), LUARETRY_OK);
  CHECK_EQ_STR(buf, "abi");
  CHECK_CODE(luaretry_policy_get(p, "fleet.redis", buf, sizeof buf), LUARETRY_OK);
  CHECK_EQ_STR(buf, "none");
  CHECK_CODE(luaretry_policy_set(p, "fleet.redis", "redis://u:pw1@127.0.0.1:1/2"), LUARETRY_OK);
  CHECK_CODE(luaretry_policy_get(p, "fleet.redis", buf, sizeof buf), LUARETRY_OK);
  CHECK_EQ_STR(buf, "redis://***@127.0.0.1:1/2");
  CHECK_CODE(luaretry_policy_get(p, "fleet.command_timeout", buf, sizeof buf), LUARETRY_OK);
  CHECK_EQ_STR(buf, "100");
  CHECK_CODE(luaretry_policy_set(p, "fleet.sync", "0"), LUARETRY_E_ARG);
  CHECK_CONTAINS(luaretry_policy_errmsg(p), "fleet.sync: expected a whole number from 1 to 60000");
  luaretry_policy_free(p);
}

static int printed;
static void count_print(void *ud, const char *line) {
  (void)ud;
  if (strcmp(line, "hello") == 0) printed++;
}

/* The callback registrations share one verb (on_); the old set_log alias
 * is gone. */
static void test_callback_names(void) {
  static const char *src = "max_attempts = 1\nprint('hello')\n";
  luaretry_policy *p;
  if (!CHECK_CODE(luaretry_policy_new(&p), LUARETRY_OK)) return;
  luaretry_policy_on_log(p, count_print, NULL);
  CHECK_CODE(luaretry_policy_load_string(p, "=log", src), LUARETRY_OK);
  CHECK_EQ_INT(printed, 1);
  luaretry_policy_on_log(p, NULL, NULL); /* taken away */
  CHECK_CODE(luaretry_policy_load_string(p, "=log", src), LUARETRY_OK);
  CHECK_EQ_INT(printed, 1);
  luaretry_policy_on_log(p, count_print, NULL);
  CHECK_CODE(luaretry_policy_load_string(p, "=log", src), LUARETRY_OK);
  CHECK_EQ_INT(printed, 2);
  luaretry_policy_free(p);
}

int main(void) {
  test_version();
  test_callback_names();
  test_sizes();
  test_inits();
  test_names();
  test_fields();
  return check_done();
}
