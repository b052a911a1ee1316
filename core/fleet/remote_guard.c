/* remote_guard.c: the fleet as the engine sees it, a remote view of the
 * guards (lr_remote_ops in engine/engine.h).  The engine asks it before its
 * local guards and counts every outcome into both; the policy plugs a
 * handle in per load.  Only the pre-retry refresh and a half-open
 * breaker's probe permit (fleet.h) may wait for Redis, each bounded. */
#include <math.h>

#include "fleet_internal.h"
#include "remote_guard.h"

static int budget_allows_retry(void *ud, double now) {
  (void)now; /* the fleet keeps its own clock */
  int v = lr_fleet_budget_allows_retry(ud);
  return v == LR_FLEET_LOCAL ? LR_REMOTE_LOCAL : v;
}

/* The call's deadline as CLOCK_MONOTONIC ms (0: none; 1, long past, when
 * less than a ms is left: no round trip). */
static int64_t limit_of(double left) {
  if (left <= 0) return 0;
  return left < 0.001 ? 1 : lr_monotonic_ms() + (int64_t)ceil(left * 1000) + 1;
}

static int breaker_admits(void *ud, int first_attempt, double now, double left, lr_waiter *w) {
  (void)now;
  int v = lr_fleet_breaker_admits_by(ud, first_attempt, limit_of(left), w);
  return v == LR_FLEET_LOCAL ? LR_REMOTE_LOCAL : v;
}

/* Counted at once; sent with the next batch (never waiting).  `now` is a
 * real call's clock, CLOCK_MONOTONIC (a call on the virtual clock never
 * reaches the fleet), read already: the sync period is judged by it. */
static void record(void *ud, lr_remote_outcome o, double now) {
  lr_fleet_record(ud, o == LR_REMOTE_SUCCESS     ? LR_FLEET_SUCCESS
                      : o == LR_REMOTE_FAILURE   ? LR_FLEET_FAILURE
                      : o == LR_REMOTE_THROTTLED ? LR_FLEET_THROTTLED
                                                 : LR_FLEET_ANSWERED);
  lr_fleet_maybe_sync_at(ud, (int64_t)(now * 1000));
}

/* A request counted; a batch goes if one is due (a process whose calls
 * the throttle refuses has no outcome to drive the syncs). */
static double throttle_request(void *ud, double now) {
  double r = lr_fleet_throttle_request(ud);
  lr_fleet_maybe_sync_at(ud, (int64_t)(now * 1000));
  return r == LR_FLEET_LOCAL ? LR_REMOTE_LOCAL : r;
}

static double throttle_refusal(void *ud, double now) {
  (void)now;
  double r = lr_fleet_throttle_refusal(ud);
  return r == LR_FLEET_LOCAL ? LR_REMOTE_LOCAL : r;
}

static void spend(void *ud, double now) {
  (void)now;
  lr_fleet_spend(ud);
}

/* Within what is left of the call's deadline, and ended by its cancel.
 * The limit is rounded up (a ms at most past the deadline): a round trip
 * cut short by it must leave the call past its deadline, never a ms
 * before it with an attempt of a ms to make. */
static void refresh(void *ud, double now, double left, lr_waiter *w) {
  (void)now;
  lr_fleet_refresh_by(ud, limit_of(left), w); /* a failure is told through the fleet's log */
}

static double tokens(void *ud) { return lr_fleet_tokens(ud); }

/* The call's clock is CLOCK_MONOTONIC in seconds, as the lease's is. */
static int rate_reserve(void *ud, double now, double at, double latest, double left, double u,
                        lr_waiter *w, double *wait) {
  (void)now;
  int v = lr_fleet_rate_reserve(ud, at, latest, limit_of(left), u, w, wait);
  return v == LR_FLEET_LOCAL ? LR_REMOTE_LOCAL : v;
}

static int reserve_take(void *ud, double now, double left, lr_waiter *w) {
  (void)now;
  int v = lr_fleet_reserve_take(ud, limit_of(left), w);
  return v == LR_FLEET_LOCAL ? LR_REMOTE_LOCAL : v;
}

const lr_remote_ops lr_fleet_remote_ops = {
  budget_allows_retry, breaker_admits,   record, refresh,      tokens,
  throttle_request,    throttle_refusal, spend,  rate_reserve, reserve_take,
};
