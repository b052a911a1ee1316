/* test_retry_after.c: luaretry_retry_after, the public Retry-After reader:
 * delta-seconds and the three HTTP-date forms of RFC 9110 (the RFC's own
 * example date, Sun, 06 Nov 1994 08:49:37 GMT, is 784111777), bounded, and
 * -1 for whatever is not a wait.  And luaretry_rate_limit, the reader of
 * the rate-limit fields (RateLimit, X-RateLimit-*), with the same promises. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "luaretry.h"

#define EXAMPLE 784111777.0 /* Sun, 06 Nov 1994 08:49:37 GMT */

static void test_delta_seconds(void) {
  CHECK_EQ_DBL(luaretry_retry_after("120", 0), 120);
  CHECK_EQ_DBL(luaretry_retry_after("  7  ", 0), 7);
  CHECK_EQ_DBL(luaretry_retry_after("0", 0), 0);
  CHECK_EQ_DBL(luaretry_retry_after("99999999999999999999999", 0), 1e9); /* bounded */
  CHECK_EQ_DBL(luaretry_retry_after("-5", 0), -1);
  CHECK_EQ_DBL(luaretry_retry_after("5.5", 0), -1);
  CHECK_EQ_DBL(luaretry_retry_after("5s", 0), -1);
  CHECK_EQ_DBL(luaretry_retry_after("", 0), -1);
  CHECK_EQ_DBL(luaretry_retry_after("   ", 0), -1);
  CHECK_EQ_DBL(luaretry_retry_after(NULL, 0), -1);
  CHECK_EQ_DBL(luaretry_retry_after("1e3", 0), -1);
}

static void test_dates(void) {
  double before = EXAMPLE - 60;
  CHECK_EQ_DBL(luaretry_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", before), 60);
  CHECK_EQ_DBL(luaretry_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", before), 60);
  CHECK_EQ_DBL(luaretry_retry_after("Sun Nov  6 08:49:37 1994", before), 60);
  CHECK_EQ_DBL(luaretry_retry_after("sun, 06 nov 1994 08:49:37 gmt", before), 60);
  /* the same instant is no wait; a past one is ignored */
  CHECK_EQ_DBL(luaretry_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", EXAMPLE), 0);
  CHECK_EQ_DBL(luaretry_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", EXAMPLE + 1), -1);
  /* leap days, the year 2000, and two-digit years after 1999 */
  CHECK_EQ_DBL(luaretry_retry_after("Tue, 29 Feb 2000 00:00:00 GMT", 951782400 - 1), 1);
  CHECK_EQ_DBL(luaretry_retry_after("Tuesday, 01-Jan-30 00:00:00 GMT", 1893456000 - 10), 10);
  CHECK_EQ_DBL(luaretry_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", 0), 1e9); /* bounded */
  static const char *const bad[] = {
    "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 31 Nov 1994 08:49:37 GMT",
    "Sun, 29 Feb 1900 08:49:37 GMT", "Sun, 06 Nov 1994 24:49:37 GMT",
    "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49 GMT",
    "Sun 06 Nov 1994 08:49:37 GMT",  "Sun, 06 Nov 1994 08:49:37 GMT x",
    "Sun, 06-Nov 1994 08:49:37 GMT", "tomorrow",
    "Sun Nov  6 08:49:37",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    CHECK_EQ_DBL(luaretry_retry_after(bad[i], before), -1);
}

#define NOW 1.7e9
#define H(n, v) \
  { n, v }

static double rl1(const char *name, const char *value) {
  luaretry_header h[] = { H(name, value) };
  return luaretry_rate_limit(h, 1, NOW);
}

static double rl2(const char *n1, const char *v1, const char *n2, const char *v2) {
  luaretry_header h[] = { H(n1, v1), H(n2, v2) };
  return luaretry_rate_limit(h, 2, NOW);
}

static void test_ietf_field(void) {
  CHECK_EQ_DBL(rl1("ratelimit", "\"default\";r=0;t=30"), 30);
  CHECK_EQ_DBL(rl1("RateLimit", "default;r=0;t=30"), 30);   /* a token, any case */
  CHECK_EQ_DBL(rl1("ratelimit", " \"a\" ; t=7 ; r=0 "), 7); /* any order, blanks */
  CHECK_EQ_DBL(rl1("ratelimit", "\"a\";r=5;t=30"), -1);     /* quota left */
  /* several quotas: the first spent one counts */
  CHECK_EQ_DBL(rl1("ratelimit", "\"day\";r=100;t=3600, \"min\";r=0;t=12, \"x\";r=0;t=1"), 12);
  CHECK_EQ_DBL(rl1("ratelimit", "\"q,;=\\\"\";r=0;t=3"), 3); /* quoted , ; = \" */
  CHECK_EQ_DBL(rl1("ratelimit", "\"a\";r=0;t=1;t=4"), 4);    /* last parameter wins */
  CHECK_EQ_DBL(rl1("ratelimit", "\"a\";r=0;t=0"), 0);
  CHECK_EQ_DBL(rl1("ratelimit", "\"a\";r=0;t=999999999"), 999999999);
  /* repeated fields: the first that gives a wait */
  CHECK_EQ_DBL(rl2("ratelimit", "\"a\";r=0;t=x", "ratelimit", "\"b\";r=0;t=9"), 9);
  static const char *const bad[] = {
    "\"a\";r=0",
    "\"a\";t=30",
    "\"a\";r=0;t=-5",
    "\"a\";r=-0;t=5",
    "\"a\";r=0;t=1.5",
    "\"a\";r=0;t=1000000001",
    "\"a\";r=0;t=9999999999999999999",
    "\"a\";r=0;t=",
    "\"a\";r;t=5",
    "r=0;t=5x",
    "",
    ";;;,,,",
    "\"unterminated;r=0;t=5",
    "\"a\";r=1;t=5",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK_EQ_DBL(rl1("ratelimit", bad[i]), -1);
}

static void test_x_ratelimit(void) {
  CHECK_EQ_DBL(rl2("x-ratelimit-remaining", "0", "x-ratelimit-reset", "42"), 42); /* delta */
  CHECK_EQ_DBL(rl2("X-RateLimit-Remaining", " 0 ", "X-RateLimit-Reset", "1700000060"), 60);
  CHECK_EQ_DBL(rl2("x-ratelimit-remaining", "0", "x-ratelimit-reset", "1700000000.5"), 0.5);
  CHECK_EQ_DBL(rl2("ratelimit-remaining", "0", "ratelimit-reset", "8"), 8);
  CHECK_EQ_DBL(rl2("x-ratelimit-remaining", "3", "x-ratelimit-reset", "42"), -1); /* left */
  CHECK_EQ_DBL(rl1("x-ratelimit-reset", "42"), -1);    /* remaining unknown */
  CHECK_EQ_DBL(rl1("x-ratelimit-remaining", "0"), -1); /* no reset */
  CHECK_EQ_DBL(rl2("x-ratelimit-remaining", "0", "x-ratelimit-reset", "1699999999"), -1); /* past */
  CHECK_EQ_DBL(rl2("x-ratelimit-remaining", "0", "x-ratelimit-reset", "9999999999"),
               -1); /* 1e9+ ahead */
  static const char *const bad[] = { "-1",  "abc", "1e3", "5.", ".5", "1,2", "", "1234567890123456",
                                     "0x10" };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    CHECK_EQ_DBL(rl2("x-ratelimit-remaining", "0", "x-ratelimit-reset", bad[i]), -1);
  /* of repeated headers the first valid one counts */
  luaretry_header h[] = { H("x-ratelimit-remaining", "zero"), H("x-ratelimit-remaining", "0"),
                          H("x-ratelimit-remaining", "5"),    H("x-ratelimit-reset", "-3"),
                          H("x-ratelimit-reset", "20"),       H("x-ratelimit-reset", "30") };
  CHECK_EQ_DBL(luaretry_rate_limit(h, 6, NOW), 20);
  /* the IETF field before X-RateLimit-*; a bad one leaves the other */
  luaretry_header both[] = { H("x-ratelimit-remaining", "0"), H("x-ratelimit-reset", "20"),
                             H("ratelimit", "\"a\";r=0;t=5") };
  CHECK_EQ_DBL(luaretry_rate_limit(both, 3, NOW), 5);
  both[2].value = "\"a\";r=0;t=oops";
  CHECK_EQ_DBL(luaretry_rate_limit(both, 3, NOW), 20);
}

static void test_rate_limit_edges(void) {
  luaretry_header h[302];
  for (int i = 0; i < 300; i++) h[i] = (luaretry_header)H("x-other", "0");
  h[300] = (luaretry_header)H("x-ratelimit-remaining", "0");
  h[301] = (luaretry_header)H("x-ratelimit-reset", "15");
  CHECK_EQ_DBL(luaretry_rate_limit(h, 302, NOW), 15); /* after 300 other headers */
  CHECK_EQ_DBL(luaretry_rate_limit(h, 302, NAN), -1);
  CHECK_EQ_DBL(luaretry_rate_limit(NULL, 3, NOW), -1);
  CHECK_EQ_DBL(luaretry_rate_limit(h, 0, NOW), -1);
  luaretry_header nulls[] = { H(NULL, "0"), H("ratelimit", NULL),
                              H("x-ratelimit-remaining", NULL) };
  CHECK_EQ_DBL(luaretry_rate_limit(nulls, 3, NOW), -1);
}

/* luaretry_rate_quota: every remaining count, the tightest item, the
 * policy's quota beside it; -1 for fields that do not read. */
static void test_rate_quota(void) {
  double r, t;
  luaretry_header ietf[] = { H("ratelimit", "\"day\";r=9000;t=80000, \"min\";r=50;t=30"),
                             H("ratelimit-policy", "\"min\";q=100;w=60") };
  CHECK_EQ_INT(luaretry_rate_quota(ietf, 2, NOW, &r, &t), 1);
  CHECK_EQ_DBL(r, 9000); /* 80000 / 9000 s apart: tighter than 30 / 50 */
  CHECK_EQ_DBL(t, 80000);
  luaretry_header spent[] = { H("ratelimit", "\"a\";r=5;t=10, \"b\";r=0;t=3") };
  CHECK_EQ_INT(luaretry_rate_quota(spent, 1, NOW, &r, &t), 1);
  CHECK_EQ_DBL(r, 0);
  CHECK_EQ_DBL(t, 3);
  luaretry_header legacy[] = { H("x-ratelimit-remaining", "7"),
                               H("x-ratelimit-reset", "1700000020") };
  CHECK_EQ_INT(luaretry_rate_quota(legacy, 2, NOW, &r, &t), 1);
  CHECK_EQ_DBL(r, 7);
  CHECK_EQ_DBL(t, 20);
  luaretry_header draft[] = { H("ratelimit-remaining", "2"), H("ratelimit-reset", "4") };
  CHECK_EQ_INT(luaretry_rate_quota(draft, 2, NOW, &r, &t), 1);
  CHECK_EQ_DBL(t, 4);
  luaretry_header none[] = { H("retry-after", "5") };
  CHECK_EQ_INT(luaretry_rate_quota(none, 1, NOW, &r, &t), 0);
  const char *bad[] = { "\"a\";r=-1;t=5", "\"a\";r=1;t=zz", "garbage", "\"a\";r=1",
                        "\"a\";r=0;t=99999999999999999999" };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    luaretry_header h[] = { H("ratelimit", bad[i]) };
    CHECK_EQ_INT(luaretry_rate_quota(h, 1, NOW, &r, &t), -1);
    CHECK_EQ_DBL(r, -1);
  }
  luaretry_header half[] = { H("x-ratelimit-remaining", "lots"), H("x-ratelimit-reset", "5") };
  CHECK_EQ_INT(luaretry_rate_quota(half, 2, NOW, &r, &t), -1);
  CHECK_EQ_INT(luaretry_rate_quota(NULL, 2, NOW, &r, &t), 0);
  CHECK_EQ_INT(luaretry_rate_quota(legacy, 2, NAN, NULL, NULL), 0);
}

int main(void) {
  test_delta_seconds();
  test_rate_quota();
  test_dates();
  test_ietf_field();
  test_x_ratelimit();
  test_rate_limit_edges();
  return check_done();
}
