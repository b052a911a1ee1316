/* fuzz_retry_after.c: luaretry_retry_after (the public Retry-After reader)
 * on arbitrary bytes (now = 0 is the wall clock: the instants here are
 * others).  Invariants: the result is -1 or within [0, 1e9],
 * never NaN; a delta-seconds value does not depend on `now`; an HTTP-date
 * read at two instants differs by exactly the time between them (unless
 * one reading is past or capped). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "luaretry.h"

#define CAP 1e9

/* The readers return a code; these give the wait, or -1, and abort when
 * the code disagrees. */
static double ra(const char *v, double now) {
  double w;
  luaretry_code rc = luaretry_retry_after(v, now, &w);
  if ((rc == LUARETRY_OK) != (w >= 0)) abort();
  return w;
}

static double rl(const luaretry_header *h, size_t n, double now) {
  double w;
  if (luaretry_rate_limit(h, n, now, &w) != LUARETRY_OK) abort();
  return w;
}

static void check_range(double r) {
  if (isnan(r) || (r != -1 && (r < 0 || r > CAP))) abort();
}

/* The same value read at two instants `delta` seconds apart: a date
 * comes `delta` seconds nearer. */
static void check_shift(const char *v, int date, double t0, double delta) {
  double a = ra(v, t0), b = ra(v, t0 + delta);
  check_range(a);
  check_range(b);
  if (!date || a < 0 || b < 0 || a >= CAP) return; /* past at one of them, or capped */
  if (fabs((a - b) - delta) > 1e-6 * (1 + fabs(delta))) abort();
}

#define MAX_LINES 400 /* more than the 300 headers a hostile answer might send */

static void check_rate_limit(const luaretry_header *h, size_t n) {
  static const double nows[] = { 1, 1.7e9, 4e9 }; /* 0: the wall clock */
  for (size_t i = 0; i < sizeof nows / sizeof nows[0]; i++) {
    double a = rl(h, n, nows[i]);
    check_range(a);
    if (a != rl(h, n, nows[i])) abort();
  }
  check_range(rl(h, n, NAN));
  /* the pacing reader: read or not, a count and a reset in range */
  double r, t;
  luaretry_code rc = luaretry_rate_quota(h, n, 1.7e9, &r, &t);
  if (rc != LUARETRY_OK && rc != LUARETRY_E_ARG) abort();
  int v = rc != LUARETRY_OK ? -1 : r >= 0 ? 1 : 0;
  if (v == 1 && !(r >= 0 && r < 1e16 && t >= 0 && t <= 1e9)) abort();
  if (v != 1 && (r != -1 || t != -1)) abort();
}

/* The bytes as the value of each field, then as header lines. */
static void fuzz_rate_limit(const char *v, char *lines) {
  luaretry_header one[3] = { { "ratelimit", v },
                             { "x-ratelimit-remaining", "0" },
                             { "x-ratelimit-reset", v } };
  check_rate_limit(one, 3);
  one[1].value = v;
  check_rate_limit(one + 1, 2);
  static luaretry_header h[MAX_LINES];
  size_t n = 0;
  for (char *line = lines; line && n < MAX_LINES; n++) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = '\0';
    char *colon = strchr(line, ':');
    if (colon) *colon = '\0';
    h[n].name = line;
    h[n].value = colon ? colon + 1 : "0";
    line = nl ? nl + 1 : NULL;
  }
  check_rate_limit(h, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *v = malloc(size + 1);
  if (!v) return 0;
  memcpy(v, data, size);
  v[size] = '\0';
  const char *s = v + strspn(v, " \t");
  int number = *s >= '0' && *s <= '9';
  /* instants: the epoch, RFC 9110's example date, about now, far ahead */
  static const double nows[] = { 1, 784111777, 1.7e9, 4e9 }; /* 0: the wall clock */
  for (size_t i = 0; i < sizeof nows / sizeof nows[0]; i++) check_shift(v, !number, nows[i], 3600);
  /* a number of seconds reads the same at any instant */
  if (number) {
    double a = ra(v, 0), b = ra(v, 2e9);
    if (a != b) abort();
  }
  check_range(ra(v, NAN));
  check_range(ra(v, -INFINITY));
  check_range(ra(v, 1e300));
  char *lines = malloc(size + 1);
  if (lines) {
    memcpy(lines, v, size + 1);
    fuzz_rate_limit(v, lines);
    free(lines);
  }
  free(v);
  return 0;
}
