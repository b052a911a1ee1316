/* remote_guard.c: the fleet as the engine sees it, a remote view of the
 * guards (lr_remote_ops in engine/engine.h).  The engine asks it before its
 * local guards and counts every outcome into both; the policy plugs a
 * handle in per load.  Nothing here waits for Redis: a round trip a
 * question needs is the handle's worker's (worker.c), and the question is
 * answered at once with what is known. */
#include <math.h>

#include "fleet_internal.h"
#include "remote_guard.h"

/* The last known state of the fleet, with this process's counts since:
 * the check after a retry's wait is answered from it too (its failure's
 * round trip, kicked when it was recorded, is usually back by then; a
 * view older than stale_ms is not used). */
static int budget_allows_retry(void *ud, double now) {
  (void)now; /* the fleet keeps its own clock */
  int v = lr_fleet_budget_allows_retry(ud);
  return v == LR_FLEET_LOCAL ? LR_REMOTE_LOCAL : v;
}

/* The call's deadline as CLOCK_MONOTONIC ms (0: none; 1, long past, when
 * less than a ms is left). */
static int64_t limit_of(double left) {
  if (left <= 0) return 0;
  return left < 0.001 ? 1 : lr_monotonic_ms() + (int64_t)ceil(left * 1000) + 1;
}

static int breaker_admits(void *ud, int first_attempt, double now, double left, lr_waiter *w) {
  (void)now, (void)left, (void)w; /* nothing waits */
  int v = lr_fleet_breaker_admits(ud, first_attempt);
  return v == LR_FLEET_LOCAL ? LR_REMOTE_LOCAL : v == LR_FLEET_PERMIT ? LR_REMOTE_PERMIT : v;
}

/* What a later guard refused: out of the batch, back among the permits. */
static void throttle_unrequest(void *ud, double now) {
  (void)now;
  lr_fleet_throttle_unrequest(ud);
}

static void permit_give_back(void *ud) { lr_fleet_permit_give_back(ud); }

/* Counted at once; sent with the next batch (never waiting): a failure's
 * within the sync period, or at once when no block of the budget's tokens
 * paid for it and a block could be had (budget_lease.c), so that the
 * fleet's counts are back before the retry is asked about again after
 * its wait; a success's with the next outcome after the sync period.  `now` is a real call's clock, CLOCK_MONOTONIC (a call on the
 * virtual clock never reaches the fleet), read already: the sync period
 * is judged by it. */
static void record(void *ud, lr_remote_outcome o, double now) {
  int paid = lr_fleet_record(ud, o == LR_REMOTE_SUCCESS     ? LR_FLEET_SUCCESS
                                 : o == LR_REMOTE_FAILURE   ? LR_FLEET_FAILURE
                                 : o == LR_REMOTE_THROTTLED ? LR_FLEET_THROTTLED
                                                            : LR_FLEET_ANSWERED);
  if (o == LR_REMOTE_FAILURE && !paid && lr_budget_lease_worth_asking(ud))
    lr_fleet_refresh_soon(ud);
  else if (o == LR_REMOTE_FAILURE)
    lr_fleet_sync_within_period(ud, (int64_t)(now * 1000));
  else
    lr_fleet_maybe_sync_at(ud, (int64_t)(now * 1000));
}

/* A request counted; a batch goes if one is due (a process whose calls
 * the throttle refuses has no outcome to drive the syncs). */
static double throttle_request(void *ud, double now) {
  double r = lr_fleet_throttle_request(ud);
  lr_fleet_maybe_sync_at(ud, (int64_t)(now * 1000));
  return r == LR_FLEET_LOCAL ? LR_REMOTE_LOCAL : r;
}

static void throttle_accept(void *ud, double now) {
  (void)now;
  lr_fleet_throttle_accept(ud);
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

/* A call whose thread waits in the library anyway (luaretry_call_wait,
 * luaretry_call_run: its backoff was a wait there) waits for one round
 * trip, within what is left of its deadline and ended by its cancel, so
 * that its retry is decided on the fleet's counts as of now (the limit is
 * rounded up, a ms at most past the deadline: a round trip cut short by
 * it must leave the call past its deadline).  An event loop's call never
 * waits: the worker is kicked when the view is not recent, and the retry
 * is decided on what is known (the failure's own round trip, kicked when
 * it was recorded, is usually back by now).  A retry the fleet's tokens
 * refused before its wait (`reserve`) has its round trip ask the fleet's
 * reserve too, and gets the answer here, on its own thread: its own, not
 * another call's. */
static int refresh(void *ud, double now, double left, lr_waiter *w, int reserve) {
  (void)now;
  int got = LR_FLEET_LOCAL;
  if (w && atomic_load(&w->blocking)) /* a failure is told through the fleet's log */
    lr_fleet_refresh_by(ud, limit_of(left), w, reserve ? &got : NULL);
  else
    lr_fleet_refresh_soon(ud);
  return got == LR_FLEET_LOCAL ? LR_REMOTE_LOCAL : got;
}

static double tokens(void *ud) { return lr_fleet_tokens(ud); }

/* The call's clock is CLOCK_MONOTONIC in seconds, as the lease's is. */
static int rate_reserve(void *ud, double now, double at, double latest, double left, double u,
                        lr_waiter *w, double *wait) {
  (void)now;
  (void)w;
  int v = lr_fleet_rate_reserve(ud, at, latest, limit_of(left), u, wait);
  return v == LR_FLEET_LOCAL ? LR_REMOTE_LOCAL : v;
}

/* A round trip only for a call that waits anyway (the blocking API), as
 * refresh makes one, and only when refresh's did not answer; a host's
 * event loop is never held: the local reserve decides for it. */
static int reserve_take(void *ud, double now, double left, lr_waiter *w) {
  (void)now;
  if (!w || !atomic_load(&w->blocking)) return LR_REMOTE_LOCAL;
  int v = lr_fleet_reserve_take(ud, limit_of(left), w);
  return v == LR_FLEET_LOCAL ? LR_REMOTE_LOCAL : v;
}

const lr_remote_ops lr_fleet_remote_ops = {
  budget_allows_retry,
  breaker_admits,
  record,
  refresh,
  tokens,
  throttle_request,
  throttle_refusal,
  spend,
  rate_reserve,
  NULL, /* the breaker's rate window stays each process's */
  reserve_take,
  throttle_unrequest,
  permit_give_back,
  throttle_accept,
};
