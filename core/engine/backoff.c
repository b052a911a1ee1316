/* backoff.c: the wait before retry n, as README.md "The arithmetic" gives
 * it: Google Cloud's truncated exponential backoff (its "Retry strategy"
 * pages: the smaller of 2^n plus a random part and a maximum) and the
 * jitters of Azure's Retry pattern.
 * Powers are taken by repeated squaring rather than pow(): plain IEEE
 * multiplications give the same bits on every machine, and overflow only
 * ever reaches +inf, which the cap turns into `max`. */
#include <math.h>

#include "engine.h"

static double power(double base, uint64_t n) {
  double result = 1.0;
  while (n) {
    if (n & 1) result *= base;
    n >>= 1;
    if (n) base *= base;
    if (isinf(result)) break;
    /* n still has a bit set, so result will be multiplied by inf */
    if (n && isinf(base) && result > 0) return INFINITY;
  }
  return result;
}

/* The first retry whose raw exponential delay passes max: from there on
 * the wait is the cap, with no power to take (a binary search, as the
 * delay grows with n). */
void lr_backoff_prepare(lr_backoff *b) {
  b->capped_from = UINT64_MAX;
  if (b->kind != LUARETRY_BACKOFF_EXPONENTIAL || b->initial <= 0 || b->multiplier <= 1) return;
  uint64_t lo = 0, hi = UINT64_MAX; /* raw(hi) > max; raw(n) for n < lo is not */
  if (!(b->initial * power(b->multiplier, hi) > b->max)) return;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (b->initial * power(b->multiplier, mid) > b->max)
      hi = mid;
    else
      lo = mid + 1;
  }
  b->capped_from = lo;
}

double lr_backoff_raw(const lr_backoff *b, uint64_t n) {
  switch (b->kind) {
  case LUARETRY_BACKOFF_CONSTANT: return b->initial;
  case LUARETRY_BACKOFF_LINEAR: return b->initial + b->step * (double)n;
  case LUARETRY_BACKOFF_EXPONENTIAL:
    if (b->initial == 0) return 0; /* 0 * inf would be NaN */
    if (n >= b->capped_from) return INFINITY;
    /* the first retry (most calls' only one): initial * 1, without the loop */
    return n == 0 ? b->initial : b->initial * power(b->multiplier, n);
  case LUARETRY_BACKOFF_SCRIPT: break;
  }
  return 0;
}

double lr_backoff_wait(const lr_backoff *b, uint64_t n, double *previous, lr_rng *r, int *capped) {
  double d = lr_backoff_raw(b, n);
  double v = d > b->max ? b->max : d;
  double w;
  *capped = d > b->max;
  switch (b->jitter) {
  case LUARETRY_JITTER_ADDITIVE: {
    double extra = lr_rng_uniform(r, 0, b->jitter_max);
    if (b->cap_jitter) {
      w = d + extra;
      *capped = w > b->max;
      if (*capped) w = b->max;
    } else {
      w = v + extra;
    }
    break;
  }
  case LUARETRY_JITTER_FULL: w = lr_rng_uniform(r, 0, v); break;
  case LUARETRY_JITTER_EQUAL: w = v / 2 + lr_rng_uniform(r, 0, v / 2); break;
  case LUARETRY_JITTER_DECORRELATED:
    w = lr_rng_uniform(r, b->initial, 3 * *previous);
    *capped = w > b->max;
    if (*capped) w = b->max;
    *previous = w;
    break;
  case LUARETRY_JITTER_NONE:
  default: w = v; break;
  }
  return w;
}
