/* test_retry_after.c: luaretry_retry_after, the public Retry-After reader:
 * delta-seconds and the three HTTP-date forms of RFC 9110 (the RFC's own
 * example date, Sun, 06 Nov 1994 08:49:37 GMT, is 784111777), bounded, and
 * LUARETRY_E_ARG (wait -1) for whatever is not a wait; now = 0 is the wall clock.  And luaretry_rate_limit, the reader of
 * the rate-limit fields (RateLimit, X-RateLimit-*), with the same promises. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "luaretry.h"

#define EXAMPLE 784111777.0 /* Sun, 06 Nov 1994 08:49:37 GMT */

/* The readers return a code (LUARETRY_OK with the wait; LUARETRY_E_ARG
 * for a value that gives none, *wait = -1); these give the wait, or -1,
 * and check that the code agrees. */
static double ra(const char *value, double now) {
  double w = -2;
  luaretry_code rc = luaretry_retry_after(value, now, &w);
  CHECK(rc == (w >= 0 ? LUARETRY_OK : LUARETRY_E_ARG));
  return w;
}

static double rl(const luaretry_header *h, size_t n, double now) {
  double w = -2;
  CHECK_CODE(luaretry_rate_limit(h, n, now, &w), LUARETRY_OK);
  return w;
}

/* 1 read, 0 none, -1 a field that does not read */
static int rq(const luaretry_header *h, size_t n, double now, double *r, double *t) {
  luaretry_code rc = luaretry_rate_quota(h, n, now, r, t);
  return rc != LUARETRY_OK ? -1 : *r >= 0 ? 1 : 0;
}

/* now = 0 reads the wall clock: an HTTP-date 100 s ahead is a wait of
 * about 100 s, one in the past none (the obvious call, never 1e9 s). */
static void test_wall_clock(void) {
  char date[64];
  time_t ahead = time(NULL) + 100;
  strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", gmtime(&ahead));
  double w = -1;
  CHECK_CODE(luaretry_retry_after(date, 0, &w), LUARETRY_OK);
  CHECK(w > 50 && w <= 100);
  CHECK_CODE(luaretry_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 0, &w), LUARETRY_E_ARG);
  CHECK_EQ_DBL(w, -1);
  CHECK_CODE(luaretry_retry_after("5", 0, &w), LUARETRY_OK);
  CHECK_EQ_DBL(w, 5);
  luaretry_header h[] = { { "x-ratelimit-remaining", "0" }, { "x-ratelimit-reset", "" } };
  char reset[32];
  snprintf(reset, sizeof reset, "%lld", (long long)ahead);
  h[1].value = reset;
  CHECK_CODE(luaretry_rate_limit(h, 2, 0, &w), LUARETRY_OK);
  CHECK(w > 50 && w <= 100);
}

static void test_delta_seconds(void) {
  CHECK_EQ_DBL(ra("120", 0), 120);
  CHECK_EQ_DBL(ra("  7  ", 0), 7);
  CHECK_EQ_DBL(ra("0", 0), 0);
  CHECK_EQ_DBL(ra("99999999999999999999999", 0), 1e9); /* bounded */
  CHECK_EQ_DBL(ra("-5", 0), -1);
  CHECK_EQ_DBL(ra("5.5", 0), -1);
  CHECK_EQ_DBL(ra("5s", 0), -1);
  CHECK_EQ_DBL(ra("", 0), -1);
  CHECK_EQ_DBL(ra("   ", 0), -1);
  CHECK_EQ_DBL(ra(NULL, 0), -1);
  CHECK_CODE(luaretry_retry_after("5", 0, NULL), LUARETRY_E_ARG);
  CHECK_EQ_DBL(ra("1e3", 0), -1);
}

static void test_dates(void) {
  double before = EXAMPLE - 60;
  CHECK_EQ_DBL(ra("Sun, 06 Nov 1994 08:49:37 GMT", before), 60);
  CHECK_EQ_DBL(ra("Sunday, 06-Nov-94 08:49:37 GMT", before), 60);
  CHECK_EQ_DBL(ra("Sun Nov  6 08:49:37 1994", before), 60);
  CHECK_EQ_DBL(ra("sun, 06 nov 1994 08:49:37 gmt", before), 60);
  /* the same instant is no wait; a past one is ignored */
  CHECK_EQ_DBL(ra("Sun, 06 Nov 1994 08:49:37 GMT", EXAMPLE), 0);
  CHECK_EQ_DBL(ra("Sun, 06 Nov 1994 08:49:37 GMT", EXAMPLE + 1), -1);
  /* leap days, the year 2000, and two-digit years after 1999 */
  CHECK_EQ_DBL(ra("Tue, 29 Feb 2000 00:00:00 GMT", 951782400 - 1), 1);
  CHECK_EQ_DBL(ra("Tuesday, 01-Jan-30 00:00:00 GMT", 1893456000 - 10), 10);
  CHECK_EQ_DBL(ra("Fri, 31 Dec 9999 23:59:59 GMT", 0), 1e9); /* bounded */
  static const char *const bad[] = {
    "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 31 Nov 1994 08:49:37 GMT",
    "Sun, 29 Feb 1900 08:49:37 GMT", "Sun, 06 Nov 1994 24:49:37 GMT",
    "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49 GMT",
    "Sun 06 Nov 1994 08:49:37 GMT",  "Sun, 06 Nov 1994 08:49:37 GMT x",
    "Sun, 06-Nov 1994 08:49:37 GMT", "tomorrow",
    "Sun Nov  6 08:49:37",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK_EQ_DBL(ra(bad[i], before), -1);
}

#define NOW 1.7e9
#define H(n, v) \
  { n, v }

static double rl1(const char *name, const char *value) {
  luaretry_header h[] = { H(name, value) };
  return rl(h, 1, NOW);
}

static double rl2(const char *n1, const char *v1, const char *n2, const char *v2) {
  luaretry_header h[] = { H(n1, v1), H(n2, v2) };
  return rl(h, 2, NOW);
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
  CHECK_EQ_DBL(rl(h, 6, NOW), 20);
  /* the IETF field before X-RateLimit-*; a bad one leaves the other */
  luaretry_header both[] = { H("x-ratelimit-remaining", "0"), H("x-ratelimit-reset", "20"),
                             H("ratelimit", "\"a\";r=0;t=5") };
  CHECK_EQ_DBL(rl(both, 3, NOW), 5);
  both[2].value = "\"a\";r=0;t=oops";
  CHECK_EQ_DBL(rl(both, 3, NOW), 20);
}

static void test_rate_limit_edges(void) {
  double w;
  luaretry_header h[302];
  for (int i = 0; i < 300; i++) h[i] = (luaretry_header)H("x-other", "0");
  h[300] = (luaretry_header)H("x-ratelimit-remaining", "0");
  h[301] = (luaretry_header)H("x-ratelimit-reset", "15");
  CHECK_EQ_DBL(rl(h, 302, NOW), 15); /* after 300 other headers */
  CHECK_EQ_DBL(rl(h, 302, NAN), -1);
  CHECK_CODE(luaretry_rate_limit(NULL, 3, NOW, &w), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_rate_limit(h, 3, NOW, NULL), LUARETRY_E_ARG);
  CHECK_EQ_DBL(rl(h, 0, NOW), -1);
  luaretry_header nulls[] = { H(NULL, "0"), H("ratelimit", NULL),
                              H("x-ratelimit-remaining", NULL) };
  CHECK_EQ_DBL(rl(nulls, 3, NOW), -1);
}

/* luaretry_rate_quota: every remaining count, the tightest item, the
 * policy's quota beside it; -1 for fields that do not read. */
static void test_rate_quota(void) {
  double r, t;
  luaretry_header ietf[] = { H("ratelimit", "\"day\";r=9000;t=80000, \"min\";r=50;t=30"),
                             H("ratelimit-policy", "\"min\";q=100;w=60") };
  CHECK_EQ_INT(rq(ietf, 2, NOW, &r, &t), 1);
  CHECK_EQ_DBL(r, 9000); /* 80000 / 9000 s apart: tighter than 30 / 50 */
  CHECK_EQ_DBL(t, 80000);
  luaretry_header spent[] = { H("ratelimit", "\"a\";r=5;t=10, \"b\";r=0;t=3") };
  CHECK_EQ_INT(rq(spent, 1, NOW, &r, &t), 1);
  CHECK_EQ_DBL(r, 0);
  CHECK_EQ_DBL(t, 3);
  luaretry_header legacy[] = { H("x-ratelimit-remaining", "7"),
                               H("x-ratelimit-reset", "1700000020") };
  CHECK_EQ_INT(rq(legacy, 2, NOW, &r, &t), 1);
  CHECK_EQ_DBL(r, 7);
  CHECK_EQ_DBL(t, 20);
  luaretry_header draft[] = { H("ratelimit-remaining", "2"), H("ratelimit-reset", "4") };
  CHECK_EQ_INT(rq(draft, 2, NOW, &r, &t), 1);
  CHECK_EQ_DBL(t, 4);
  luaretry_header none[] = { H("retry-after", "5") };
  CHECK_EQ_INT(rq(none, 1, NOW, &r, &t), 0);
  const char *bad[] = { "\"a\";r=-1;t=5", "\"a\";r=1;t=zz", "garbage", "\"a\";r=1",
                        "\"a\";r=0;t=99999999999999999999" };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    luaretry_header h[] = { H("ratelimit", bad[i]) };
    CHECK_EQ_INT(rq(h, 1, NOW, &r, &t), -1);
    CHECK_EQ_DBL(r, -1);
  }
  luaretry_header half[] = { H("x-ratelimit-remaining", "lots"), H("x-ratelimit-reset", "5") };
  CHECK_EQ_INT(rq(half, 2, NOW, &r, &t), -1);
  /* one convention: a code; a NULL argument is LUARETRY_E_ARG */
  CHECK_CODE(luaretry_rate_quota(NULL, 2, NOW, &r, &t), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_rate_quota(legacy, 2, NOW, NULL, NULL), LUARETRY_E_ARG);
  CHECK_CODE(luaretry_rate_quota(NULL, 0, NOW, &r, &t), LUARETRY_OK);
  CHECK_EQ_DBL(r, -1);
}

int main(void) {
  test_wall_clock();
  test_delta_seconds();
  test_rate_quota();
  test_dates();
  test_ietf_field();
  test_x_ratelimit();
  test_rate_limit_edges();
  return check_done();
}
