/* lease.c: the fleet's rate limiter as GCRA slots handed out in blocks
 * (engine.h "lease.c").  The grant is the arithmetic core/fleet/
 * redis_rate.c's script does on Redis; simfleet.c calls it on the virtual
 * clock, so `simulate --fleet` predicts the real fleet's pacing.
 *
 * Why slots and not tokens: a token leased now and spent later is a burst
 * the fleet's bucket never saw; a slot carries the time the fleet's GCRA
 * gave it, and is spent at or after that time (at most LR_LEASE_LATE
 * after), so the fleet's attempts keep the GCRA's spacing whoever holds
 * the slots.  A slot nobody spends in time is lost (the fleet goes a
 * little slower than its limit, never faster). */
#include <math.h>
#include <string.h>

#include "engine.h"

void lr_lease_init(lr_lease *l) {
  memset(l, 0, sizeof *l);
  l->want = 1;
}

long lr_lease_grant(double *tat, double now, double limit, long burst, long want, double horizon,
                    double *b, double *retry) {
  double interval = 1 / limit;
  double base = *tat > now ? *tat : now;
  *b = base - (double)(burst - 1) * interval;
  *retry = 0;
  long granted = 0;
  if (*b <= now + horizon) {
    double fit = floor((now + horizon - *b) / interval) + 1;
    granted = fit < (double)want ? (long)fit : want;
  }
  if (granted > 0)
    *tat = base + (double)granted * interval;
  else
    *retry = *b - now - horizon;
  return granted;
}

void lr_lease_add(lr_lease *l, long n, double origin, double b, double interval) {
  for (long j = 0; j < n && l->count < LR_LEASE_MAX; j++) {
    double t = b + (double)j * interval;
    l->slot[(l->head + l->count++) % LR_LEASE_MAX] = t > origin ? t : origin;
  }
}

int lr_lease_take(lr_lease *l, double at, double latest, double *wait) {
  while (l->count > 0 && l->slot[l->head] < at - LR_LEASE_LATE) { /* too old to spend */
    l->head = (l->head + 1) % LR_LEASE_MAX;
    l->count--;
    l->dropped++;
  }
  if (l->count == 0) return 0;
  double t = l->slot[l->head];
  if (latest >= 0 && t > latest) return -1;
  l->head = (l->head + 1) % LR_LEASE_MAX;
  l->count--;
  l->used++;
  *wait = t > at ? t - at : 0;
  return 1;
}

long lr_lease_want(lr_lease *l, double limit) {
  double most = floor(limit * LR_LEASE_BLOCK);
  long max = most < 1 ? 1 : most > LR_LEASE_MAX ? LR_LEASE_MAX : (long)most;
  if (l->dropped > 0)
    l->want = l->want > 1 ? l->want / 2 : 1;
  else if (l->used >= l->want)
    l->want = l->want * 2;
  if (l->want > max) l->want = (int)max;
  if (l->want > LR_LEASE_MAX - l->count) l->want = LR_LEASE_MAX - l->count;
  if (l->want < 1) l->want = 1;
  l->used = l->dropped = 0;
  return l->want;
}

void lr_lease_full(lr_lease *l, double now, double retry, long want, double interval) {
  l->full_until = now + retry + (double)(want - 1) * interval;
}

int lr_lease_wait_full(const lr_lease *l, double now, double at, double u, double *wait) {
  if (now >= l->full_until) return 0;
  *wait = l->full_until - at + u * LR_LEASE_SPREAD;
  return 1;
}

double lr_lease_horizon(double now, double latest) {
  if (latest < 0 || latest - now >= LR_LEASE_HORIZON) return LR_LEASE_HORIZON;
  return latest > now ? latest - now : 0;
}
