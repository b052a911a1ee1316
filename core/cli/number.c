/* number.c: the numbers of the command's own options (-m, --retry,
 * --parallel-max, simulate's --clients...), read by the one rule a
 * policy's numbers follow, in its file or a --set (libluaretry(3)): a
 * decimal number, so that `-m 2.5` and `--set attempt_timeout=2.5` take
 * the same spellings.  The rule is the library's (policy/schema.c's
 * lr_decimal); the command sees the public headers only, so it is written
 * again here, and spec/numbers_spec.lua holds the two to the same
 * spellings. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static size_t digits(const char *s) {
  size_t n = 0;
  while (s[n] >= '0' && s[n] <= '9') n++;
  return n;
}

/* Whether s is spelled as the rule says; *plain: digits alone (after an
 * optional '-'), which strtoll and strtoull read exactly. */
static int spelled(const char *s, int *plain) {
  const char *c = s + (*s == '-');
  size_t whole = digits(c), fraction = 0;
  c += whole;
  *plain = whole > 0 && !*c;
  if (*c == '.') fraction = digits(++c), c += fraction;
  if (whole + fraction == 0) return 0;
  if (*c == 'e' || *c == 'E') {
    c += 1 + (c[1] == '+' || c[1] == '-');
    size_t e = digits(c);
    if (!e) return 0;
    c += e;
  }
  return !*c;
}

int cli_decimal(const char *s, double *out) {
  int plain;
  if (!spelled(s, &plain)) return 0;
  char *end; /* the text is checked: strtod reads all of it (the C locale) */
  double v = strtod(s, &end);
  if (*end || !isfinite(v)) return 0; /* 1e999: no number a limit can be */
  *out = v;
  return 1;
}

/* v (a number by the rule) as a whole number from lo to hi; 0 if not. */
static int whole_value(double v, double lo, double hi) {
  return v == floor(v) && v >= lo && v <= hi;
}

int cli_whole(const char *s, long long lo, long long hi, long long *out) {
  int plain;
  double v;
  if (!spelled(s, &plain)) return 0;
  if (plain) { /* exact, every digit of a long long */
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
  int plain;
  double v;
  if (!spelled(s, &plain)) return 0;
  if (plain && s[0] != '-') {
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

const char *cli_decimal_note(const char *s) {
  char *end;
  int plain;
  strtod(s, &end);
  while (end != s && (*end == ' ' || *end == '\t')) end++;
  if (end == s || *end || spelled(s, &plain)) return "";
  return " (a decimal number as a policy file writes it: no spaces, '+', hex, inf or nan)";
}

int cli_number_usage(const char *cmd, const char *opt, const char *v, const char *expected) {
  char what[1400];
  /* quoted when its blanks would hide where it starts or ends (' 1') */
  const char *q = !v[0] || strpbrk(v, " \t") ? "'" : "";
  snprintf(what, sizeof what, "%s%s%s %s%.600s%s: expected %s%s", cmd ? cmd : "", cmd ? ": " : "",
           opt, q, v, q, expected, cli_decimal_note(v));
  return cli_usage("%s", what);
}
