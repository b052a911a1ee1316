/* number.c: the numbers of the command's own options (-m, --retry,
 * --parallel-max, simulate's --clients...), read by the one rule a
 * policy's numbers follow, in its file or a --set (libluaretry(3)): a
 * decimal number, so that `-m 2.5` and `--set attempt_timeout=2.5` take
 * the same spellings: the library's own reader (luaretry_tool.h's
 * luaretry_decimal). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "luaretry_tool.h"

/* Digits alone, after an optional '-': what strtoll and strtoull read
 * exactly, every digit of a 64-bit number kept. */
static int plain(const char *s) {
  const char *c = s + (*s == '-');
  size_t n = strspn(c, "0123456789");
  return n > 0 && !c[n];
}

int cli_decimal(const char *s, double *out) {
  double v;
  if (!luaretry_decimal(s, &v) || !isfinite(v)) return 0; /* 1e999: no limit */
  *out = v;
  return 1;
}

/* v (a number by the rule) as a whole number from lo to hi; 0 if not. */
static int whole_value(double v, double lo, double hi) {
  return v == floor(v) && v >= lo && v <= hi;
}

int cli_whole(const char *s, long long lo, long long hi, long long *out) {
  double v;
  if (plain(s)) {
    char *end;
    errno = 0;
    long long n = strtoll(s, &end, 10);
    if (*end || errno || n < lo || n > hi) return 0;
    *out = n;
    return 1;
  }
  if (!cli_decimal(s, &v) || !whole_value(v, (double)lo, (double)hi)) return 0;
  *out = (long long)v;
  return 1;
}

int cli_seed(const char *s, uint64_t *out) {
  double v;
  if (plain(s) && s[0] != '-') {
    char *end;
    errno = 0;
    unsigned long long n = strtoull(s, &end, 10);
    if (*end || errno) return 0;
    *out = n;
    return 1;
  }
  /* below 2^64 (-0 is 0) */
  if (!cli_decimal(s, &v) || !whole_value(v, 0, 18446744073709549568.0)) return 0;
  *out = (uint64_t)v;
  return 1;
}

const char *cli_decimal_note(const char *s) { return luaretry_decimal_note(s); }

int cli_number_usage(const char *cmd, const char *opt, const char *v, const char *expected) {
  char what[1400];
  /* quoted when its blanks would hide where it starts or ends (' 1') */
  const char *q = !v[0] || strpbrk(v, " \t") ? "'" : "";
  snprintf(what, sizeof what, "%s%s%s %s%.600s%s: expected %s%s", cmd ? cmd : "", cmd ? ": " : "",
           opt, q, v, q, expected, cli_decimal_note(v));
  return cli_usage("%s", what);
}
