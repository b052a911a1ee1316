/* retry_after.c: reading a Retry-After header (RFC 9110 section 10.2.3):
 * delta-seconds, or an HTTP-date in any of the three forms a recipient
 * must accept (IMF-fixdate, RFC 850, asctime).  Our own small parser: no
 * locale (day and month names are always English), no allocation, any
 * input; the result is bounded. */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "engine.h"

#define MAX_SECONDS 1e9  /* about 31 years: past any max_retry_after */

static const char *skip_spaces(const char *s) {
  while (*s == ' ' || *s == '\t') s++;
  return s;
}

/* Digits at s (at most `most`, at least `least`) as a number, or -1. */
static long digits(const char **s, int least, int most) {
  long v = 0;
  int n = 0;
  while (n < most && isdigit((unsigned char)**s)) v = v * 10 + (*(*s)++ - '0'), n++;
  return n >= least ? v : -1;
}

static int month_of(const char **s) {
  static const char *const months[] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
  for (int m = 0; m < 12; m++)
    if (strncasecmp(*s, months[m], 3) == 0) {
      *s += 3;
      return m;
    }
  return -1;
}

/* "HH:MM:SS" into *secs; 0, or -1 when malformed. */
static int clock_of(const char **s, long *secs) {
  long h = digits(s, 2, 2);
  if (h < 0 || *(*s)++ != ':') return -1;
  long m = digits(s, 2, 2);
  if (m < 0 || *(*s)++ != ':') return -1;
  long sec = digits(s, 2, 2);
  if (sec < 0 || h > 23 || m > 59 || sec > 60) return -1;
  *secs = h * 3600 + m * 60 + sec;
  return 0;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian; m from 0). */
static long long days_from_civil(long long y, int m, int d) {
  y -= m < 2;
  long long era = (y >= 0 ? y : y - 399) / 400;
  long long yoe = y - era * 400;
  long long mp = (m + 10) % 12;  /* March is 0 */
  long long doy = (153 * mp + 2) / 5 + d - 1;
  long long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

static int valid_day(long year, int month, long day) {
  static const int len[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
  int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return day >= 1 && day <= len[month] + (month == 1 && leap);
}

/* An HTTP-date as seconds since the epoch; -1 when it is not one. */
static double http_date(const char *s) {
  while (isalpha((unsigned char)*s)) s++;       /* the day's name: not checked */
  int asctime_form = *s == ' ';
  if (!asctime_form && *s++ != ',') return -1;
  s = skip_spaces(s);
  long day, year, secs;
  int month;
  if (asctime_form) {                           /* "Nov  6 08:49:37 1994" */
    if ((month = month_of(&s)) < 0) return -1;
    s = skip_spaces(s);
    if ((day = digits(&s, 1, 2)) < 0 || *s++ != ' ' || clock_of(&s, &secs) < 0) return -1;
    if (*s++ != ' ' || (year = digits(&s, 4, 4)) < 0) return -1;
  } else {                                      /* "06 Nov 1994 ..." or "06-Nov-94 ..." */
    if ((day = digits(&s, 1, 2)) < 0) return -1;
    char sep = *s++;
    if ((sep != ' ' && sep != '-') || (month = month_of(&s)) < 0 || *s++ != sep) return -1;
    if ((year = digits(&s, 2, 4)) < 0) return -1;
    if (year < 100) year += year < 70 ? 2000 : 1900;  /* RFC 9110: two-digit years */
    if (*s++ != ' ' || clock_of(&s, &secs) < 0) return -1;
    s = skip_spaces(s);
    if (strncasecmp(s, "GMT", 3) != 0) return -1;
    s += 3;
  }
  if (*skip_spaces(s) || !valid_day(year, month, day)) return -1;
  return (double)days_from_civil(year, month, (int)day) * 86400.0 + (double)secs;
}

double luaretry_retry_after(const char *value, double now) {
  if (!value || !isfinite(now)) return -1;
  const char *s = skip_spaces(value);
  if (isdigit((unsigned char)*s)) {
    /* delta-seconds: 1*DIGIT, nothing after but spaces */
    double v = 0;
    while (isdigit((unsigned char)*s)) {
      if (v < MAX_SECONDS) v = v * 10 + (*s - '0');
      s++;
    }
    if (*skip_spaces(s)) return -1;
    return v > MAX_SECONDS ? MAX_SECONDS : v;
  }
  double when = http_date(s);
  if (when < 0 || when < now) return -1;
  return when - now > MAX_SECONDS ? MAX_SECONDS : when - now;
}
