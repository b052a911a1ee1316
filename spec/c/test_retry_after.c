/* test_retry_after.c: luaretry_retry_after, the public Retry-After reader:
 * delta-seconds and the three HTTP-date forms of RFC 9110 (the RFC's own
 * example date, Sun, 06 Nov 1994 08:49:37 GMT, is 784111777), bounded, and
 * -1 for whatever is not a wait. */
#include <string.h>

#include "check.h"
#include "luaretry.h"

#define EXAMPLE 784111777.0  /* Sun, 06 Nov 1994 08:49:37 GMT */

static void test_delta_seconds(void) {
  CHECK_EQ_DBL(luaretry_retry_after("120", 0), 120);
  CHECK_EQ_DBL(luaretry_retry_after("  7  ", 0), 7);
  CHECK_EQ_DBL(luaretry_retry_after("0", 0), 0);
  CHECK_EQ_DBL(luaretry_retry_after("99999999999999999999999", 0), 1e9);  /* bounded */
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
  CHECK_EQ_DBL(luaretry_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", 0), 1e9);  /* bounded */
  static const char *const bad[] = {
    "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 31 Nov 1994 08:49:37 GMT",
    "Sun, 29 Feb 1900 08:49:37 GMT", "Sun, 06 Nov 1994 24:49:37 GMT",
    "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49 GMT",
    "Sun 06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT x",
    "Sun, 06-Nov 1994 08:49:37 GMT", "tomorrow", "Sun Nov  6 08:49:37",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    CHECK_EQ_DBL(luaretry_retry_after(bad[i], before), -1);
}

int main(void) {
  test_delta_seconds();
  test_dates();
  return check_done();
}
