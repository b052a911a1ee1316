/* retry_after.c: reading a Retry-After header (RFC 9110 section 10.2.3):
 * delta-seconds, or an HTTP-date in any of the three forms a recipient
 * must accept (IMF-fixdate, RFC 850, asctime).  Our own small parser: no
 * locale (day and month names are always English), no allocation, any
 * input; the result is bounded.  And the rate-limit fields that say a
 * quota is spent until a reset (luaretry_rate_limit), with the same
 * promises. */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "engine.h"

#define MAX_SECONDS 1e9 /* about 31 years: past any max_retry_after */

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
  long long mp = (m + 10) % 12; /* March is 0 */
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
  while (isalpha((unsigned char)*s)) s++; /* the day's name: not checked */
  int asctime_form = *s == ' ';
  if (!asctime_form && *s++ != ',') return -1;
  s = skip_spaces(s);
  long day, year, secs;
  int month;
  if (asctime_form) { /* "Nov  6 08:49:37 1994" */
    if ((month = month_of(&s)) < 0) return -1;
    s = skip_spaces(s);
    if ((day = digits(&s, 1, 2)) < 0 || *s++ != ' ' || clock_of(&s, &secs) < 0) return -1;
    if (*s++ != ' ' || (year = digits(&s, 4, 4)) < 0) return -1;
  } else { /* "06 Nov 1994 ..." or "06-Nov-94 ..." */
    if ((day = digits(&s, 1, 2)) < 0) return -1;
    char sep = *s++;
    if ((sep != ' ' && sep != '-') || (month = month_of(&s)) < 0 || *s++ != sep) return -1;
    if ((year = digits(&s, 2, 4)) < 0) return -1;
    if (year < 100) year += year < 70 ? 2000 : 1900; /* RFC 9110: two-digit years */
    if (*s++ != ' ' || clock_of(&s, &secs) < 0) return -1;
    s = skip_spaces(s);
    if (strncasecmp(s, "GMT", 3) != 0) return -1;
    s += 3;
  }
  if (*skip_spaces(s) || !valid_day(year, month, day)) return -1;
  return (double)days_from_civil(year, month, (int)day) * 86400.0 + (double)secs;
}

/* `now` = 0: the wall clock, which an HTTP-date is measured against (the
 * obvious call must not read a date as 1e9 s away). */
static double wall_or(double now) {
  if (now != 0) return now;
  struct timespec ts;
  return clock_gettime(CLOCK_REALTIME, &ts) == 0 ? (double)ts.tv_sec + ts.tv_nsec * 1e-9 : NAN;
}

/* The wait a Retry-After value gives, -1 when none (ignore it). */
double lr_retry_after(const char *value, double now) {
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

/* ---- rate-limit fields: the IETF RateLimit field and X-RateLimit-* */

#define MAX_DIGITS 15 /* more is no number of seconds a server means */

/* A number at s: digits with an optional fraction, blanks around, nothing
 * else; -1 when it is not one. */
static double plain_number(const char *s) {
  if (!s) return -1;
  s = skip_spaces(s);
  double v = 0, scale = 1;
  int n = 0, point = 0;
  for (; isdigit((unsigned char)*s) || (*s == '.' && !point && n); s++) {
    if (*s == '.') {
      point = 1;
      continue;
    }
    if (++n > MAX_DIGITS) return -1;
    if (point)
      v += (*s - '0') * (scale /= 10);
    else
      v = v * 10 + (*s - '0');
  }
  if (!n || s[-1] == '.' || *skip_spaces(s)) return -1;
  return v;
}

/* A Structured Field bare item or parameter value we do not read: a
 * quoted string (with its escapes) or anything up to ';', ',' or a blank. */
static const char *skip_value(const char *s) {
  if (*s != '"') return s + strcspn(s, ";, \t");
  for (s++; *s && *s != '"'; s++)
    if (*s == '\\' && s[1]) s++;
  return *s ? s + 1 : s;
}

/* A parameter's integer value (sf-integer, not negative), or -1. */
static long long param_integer(const char **s) {
  long long v = 0;
  int n = 0;
  const char *p = *s;
  while (isdigit((unsigned char)*p) && n < MAX_DIGITS) v = v * 10 + (*p++ - '0'), n++;
  *s = skip_value(*s);
  return n && p == *s ? v : -1;
}

/* One item of a RateLimit field ("default";r=0;t=30) or RateLimit-Policy
 * field ("default";q=100;w=60): the values of the one-letter parameters
 * k[0] and k[1] into v[0] and v[1] (-1 when absent or invalid; of a
 * repeated parameter the last counts, as Structured Fields say), and the
 * item's name as it stands (*name, *name_len); *s moves past the item's
 * comma. */
static void sf_item(const char **s, const char k[2], long long v[2], const char **name,
                    size_t *name_len) {
  const char *p = skip_spaces(*s);
  *name = p;
  p = skip_value(p);
  *name_len = (size_t)(p - *name);
  v[0] = v[1] = -1;
  for (p = skip_spaces(p); *p == ';'; p = skip_spaces(p)) {
    p = skip_spaces(p + 1);
    const char *key = p;
    while (*p && (islower((unsigned char)*p) || isdigit((unsigned char)*p) || strchr("_-.*", *p)))
      p++;
    size_t klen = (size_t)(p - key);
    if (*p != '=') continue; /* a boolean parameter */
    p++;
    if (klen == 1 && (*key == k[0] || *key == k[1]))
      v[*key == k[0] ? 0 : 1] = param_integer(&p);
    else
      p = skip_value(p);
  }
  while (*p && *p != ',') p = *p == '"' ? skip_value(p) : p + 1; /* garbage to the comma */
  *s = *p ? p + 1 : p;
}

static void ratelimit_item(const char **s, long long *r, long long *t) {
  long long v[2];
  const char *name;
  size_t len;
  sf_item(s, "rt", v, &name, &len);
  *r = v[0];
  *t = v[1];
}

/* Seconds until the quota is back by one RateLimit field value: the first
 * item that says none is left (r=0) with a valid t; -1 when none does. */
static double ratelimit_field(const char *value) {
  const char *s = value;
  while (*s) {
    long long r, t;
    ratelimit_item(&s, &r, &t);
    if (r == 0 && t >= 0 && t <= MAX_SECONDS) return (double)t;
  }
  return -1;
}

/* An X-RateLimit-Reset (or RateLimit-Reset) value as a wait from now:
 * epoch seconds from 1e9 on (2001), delta seconds below; -1 for a past or
 * implausible instant (more than 1e9 s ahead: a misread unit). */
static double reset_wait(double reset, double now) {
  if (reset < 0) return -1;
  double w = reset >= MAX_SECONDS ? reset - now : reset;
  return w >= 0 && w <= MAX_SECONDS ? w : -1;
}

/* The first valid value of the named header (of several, the first valid
 * one counts), as a plain number; -1 when none is valid. */
static double first_number(const luaretry_header *h, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++) {
    if (!h[i].name || strcasecmp(h[i].name, name) != 0) continue;
    double v = plain_number(h[i].value);
    if (v >= 0) return v;
  }
  return -1;
}

/* Remaining 0 and a valid reset under one pair of names; -1 otherwise. */
static double spent_until_reset(const luaretry_header *h, size_t n, const char *remaining,
                                const char *reset, double now) {
  if (first_number(h, n, remaining) != 0) return -1;
  return reset_wait(first_number(h, n, reset), now);
}

luaretry_code luaretry_retry_after(const char *value, double now, double *wait) {
  if (!wait) return LUARETRY_E_ARG;
  *wait = lr_retry_after(value, wall_or(now));
  return *wait < 0 ? LUARETRY_E_ARG : LUARETRY_OK;
}

double lr_rate_limit(const luaretry_header *headers, size_t count, double now) {
  if (!headers || !isfinite(now)) return -1;
  for (size_t i = 0; i < count; i++) {
    if (!headers[i].name || !headers[i].value || strcasecmp(headers[i].name, "ratelimit") != 0)
      continue;
    double w = ratelimit_field(headers[i].value);
    if (w >= 0) return w;
  }
  double w = spent_until_reset(headers, count, "x-ratelimit-remaining", "x-ratelimit-reset", now);
  if (w < 0) w = spent_until_reset(headers, count, "ratelimit-remaining", "ratelimit-reset", now);
  return w;
}

/* ---- the quota as the fields tell it, for pacing before a 429 (quota.c):
 * the same readers, every remaining count rather than only 0 */

/* Of the RateLimit items, the tightest (r = 0 with the longest t, else the
 * longest t / r), and the RateLimit-Policy item of the same name's q and
 * w.  1 when one was read, 0 when there is no field, -1 when there is one
 * and no item reads. */
static int ietf_quota(const luaretry_header *h, size_t n, lr_quota_hint *q) {
  int seen = 0, found = 0;
  const char *best = NULL;
  size_t best_len = 0;
  for (size_t i = 0; i < n; i++) {
    if (!h[i].name || !h[i].value || strcasecmp(h[i].name, "ratelimit") != 0) continue;
    seen = 1;
    for (const char *s = h[i].value; *s;) {
      long long v[2];
      const char *name;
      size_t len;
      sf_item(&s, "rt", v, &name, &len);
      if (v[0] < 0 || v[1] < 0 || v[1] > MAX_SECONDS) continue;
      double r = (double)v[0], t = (double)v[1];
      int tighter = !found || (r == 0 ? q->remaining > 0 || t > q->reset
                                      : q->remaining > 0 && t / r > q->reset / q->remaining);
      if (!tighter) continue;
      found = 1;
      q->remaining = r;
      q->reset = t;
      best = name;
      best_len = len;
    }
  }
  for (size_t i = 0; found && i < n; i++) {
    if (!h[i].name || !h[i].value || strcasecmp(h[i].name, "ratelimit-policy") != 0) continue;
    for (const char *s = h[i].value; *s;) {
      long long v[2];
      const char *name;
      size_t len;
      sf_item(&s, "qw", v, &name, &len);
      if (len != best_len || strncmp(name, best, len) != 0 || v[0] <= 0 || v[1] <= 0) continue;
      q->quota = (double)v[0];
      q->window = (double)v[1];
      return 1;
    }
  }
  return found ? 1 : seen ? -1 : 0;
}

/* Remaining and reset under one pair of older names: 1, 0 (neither
 * field), -1 (one of them, and no valid pair). */
static int pair_quota(const luaretry_header *h, size_t n, const char *remaining, const char *reset,
                      double now, lr_quota_hint *q) {
  int seen = 0;
  for (size_t i = 0; i < n && !seen; i++)
    seen =
      h[i].name && (strcasecmp(h[i].name, remaining) == 0 || strcasecmp(h[i].name, reset) == 0);
  if (!seen) return 0;
  double r = first_number(h, n, remaining), t = reset_wait(first_number(h, n, reset), now);
  if (r < 0 || t < 0) return -1;
  q->remaining = floor(r);
  q->reset = t;
  return 1;
}

int lr_quota_read(const luaretry_header *headers, size_t count, double now, lr_quota_hint *q) {
  memset(q, 0, sizeof *q);
  if (!headers || !isfinite(now)) return 0;
  int v = ietf_quota(headers, count, q);
  if (v > 0) return v;
  int w = pair_quota(headers, count, "x-ratelimit-remaining", "x-ratelimit-reset", now, q);
  if (w > 0) return w;
  int x = pair_quota(headers, count, "ratelimit-remaining", "ratelimit-reset", now, q);
  if (x > 0) return x;
  return v < 0 || w < 0 || x < 0 ? -1 : 0;
}

luaretry_code luaretry_rate_limit(const luaretry_header *headers, size_t count, double now,
                                  double *wait) {
  if (!wait || (!headers && count)) return LUARETRY_E_ARG;
  *wait = lr_rate_limit(headers, count, wall_or(now));
  return LUARETRY_OK;
}

luaretry_code luaretry_rate_quota(const luaretry_header *headers, size_t count, double now,
                                  double *remaining, double *reset) {
  if (!remaining || !reset || (!headers && count)) return LUARETRY_E_ARG;
  lr_quota_hint q;
  int v = headers ? lr_quota_read(headers, count, wall_or(now), &q) : 0;
  *remaining = v > 0 ? q.remaining : -1;
  *reset = v > 0 ? q.reset : -1;
  return v < 0 ? LUARETRY_E_ARG : LUARETRY_OK;
}
