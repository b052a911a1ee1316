/* decide.c: the engine's questions, answered from the last known
 * state of the fleet without I/O (a round trip they need is the
 * worker's).  Each mirrors its local twin in
 * core/guard.c; LR_FLEET_LOCAL hands the question back to it whenever the
 * fleet's counts are not known to be current. */
#include <string.h>

#include "fleet_internal.h"

int lr_fleet_record(lr_fleet *f, lr_fleet_outcome o) {
  if (!f) return 0;
  switch (o) {
  case LR_FLEET_THROTTLED:
    /* counted, not priced: the script prices it with the cost every
     * process sharing the key shares (cfg) */
    if (atomic_load_explicit(&f->budget, memory_order_relaxed))
      atomic_fetch_add_explicit(&f->throttled, 1, memory_order_relaxed);
    /* neutral to the breaker, as locally (lr_guards_throttled): neither a
     * failure nor a reset of the run, so it never closes a half-open one */
    return 0;
  case LR_FLEET_SUCCESS:
    if (atomic_load_explicit(&f->budget, memory_order_relaxed))
      atomic_fetch_add_explicit(&f->earned,
                                atomic_load_explicit(&f->ratio_milli, memory_order_relaxed),
                                memory_order_relaxed);
    /* a success is also an answer */
    __attribute__((fallthrough));
  case LR_FLEET_ANSWERED:
    /* plain stores, no locked instruction: the script only asks whether
     * the batch holds an answer, not how many */
    atomic_store_explicit(&f->trail, 0, memory_order_relaxed);
    if (!atomic_load_explicit(&f->resets, memory_order_relaxed))
      atomic_store_explicit(&f->resets, 1, memory_order_relaxed);
    return 0;
  case LR_FLEET_FAILURE: {
    /* paid from this process's block when it holds one (budget_lease.c):
     * nothing owed to Redis but the breaker's count */
    int paid = atomic_load_explicit(&f->budget, memory_order_relaxed) && lr_budget_lease_draw(f);
    if (!paid) atomic_fetch_add_explicit(&f->spent, 1000, memory_order_relaxed);
    atomic_fetch_add_explicit(&f->trail, 1, memory_order_relaxed);
    return paid;
  }
  }
  return 0;
}

double lr_fleet_tokens(lr_fleet *f) { return f ? (double)lr_fleet_tokens_milli(f) / 1000 : 0; }

void lr_fleet_spend(lr_fleet *f) {
  if (f && atomic_load_explicit(&f->budget, memory_order_relaxed))
    atomic_fetch_add_explicit(&f->spent, 1000, memory_order_relaxed);
}

/* The throttle's window as this process sees it: the fleet's at the last
 * sync, with this process's counts since (the batch in flight is counted
 * in both for a moment after its reply, never in neither). */
static void window_now(lr_fleet *f, double *requests, double *accepts) {
  *requests = (double)(atomic_load(&f->fleet_requests) + atomic_load(&f->inflight_requests) +
                       atomic_load(&f->requests) - atomic_load(&f->unrequested));
  *accepts = (double)(atomic_load(&f->fleet_accepts) + atomic_load(&f->inflight_accepts) +
                      atomic_load(&f->accepts));
}

/* The throttle's window moves by a tenth of it per bucket: a view up to a
 * bucket old (a call whose attempts last longer than stale_ms syncs no
 * oftener) still tells the fleet's share of accepts; a degraded handle's
 * never. */
static int throttle_fresh(lr_fleet *f) {
  long long age = lr_monotonic_coarse_ms() - atomic_load(&f->last_ok_ms);
  long long bucket = atomic_load(&f->bucket_ms);
  return atomic_load(&f->health) == LR_FLEET_HEALTHY &&
         age <= (bucket > f->set.stale_ms ? bucket : f->set.stale_ms);
}

double lr_fleet_throttle_refusal(lr_fleet *f) {
  if (!f || !atomic_load(&f->throttle) || !throttle_fresh(f)) return LR_FLEET_LOCAL;
  double requests, accepts;
  window_now(f, &requests, &accepts);
  return lr_throttle_formula((double)atomic_load(&f->k_milli) / 1000, requests, accepts);
}

/* The throttle's accept: a success or a final answer, counted by the
 * attempt that made the request (lr_remote_ops' throttle_accept). */
void lr_fleet_throttle_accept(lr_fleet *f) {
  if (f && atomic_load_explicit(&f->throttle, memory_order_relaxed))
    atomic_fetch_add_explicit(&f->accepts, 1, memory_order_relaxed);
}

double lr_fleet_throttle_request(lr_fleet *f) {
  if (!f || !atomic_load(&f->throttle)) return LR_FLEET_LOCAL;
  double r = lr_fleet_throttle_refusal(f);
  atomic_fetch_add_explicit(&f->requests, 1, memory_order_relaxed);
  return r;
}

/* Out of the batch not sent yet; when a sync took it meanwhile, a debt
 * the next batch pays (sync.c), so the fleet counts it once either way. */
void lr_fleet_throttle_unrequest(lr_fleet *f) {
  if (!f || !atomic_load(&f->throttle)) return;
  long long n = atomic_load_explicit(&f->requests, memory_order_relaxed);
  while (n > 0)
    if (atomic_compare_exchange_weak(&f->requests, &n, n - 1)) return;
  atomic_fetch_add_explicit(&f->unrequested, 1, memory_order_relaxed);
}

double lr_fleet_round_trip(lr_fleet *f) { return f ? (double)atomic_load(&f->rtt_us) / 1e6 : 0; }

int lr_fleet_budget_allows_retry(lr_fleet *f) {
  if (!f || !atomic_load(&f->budget) || !lr_fleet_fresh(f, lr_monotonic_coarse_ms()))
    return LR_FLEET_LOCAL;
  return lr_fleet_tokens_milli(f) * 2 > atomic_load(&f->max_milli);
}

/* A first attempt while the fleet is half-open needs a probe permit: one
 * the worker brought is taken; else the worker is asked for one (at most
 * once per sync period in this process) and the call is refused
 * meanwhile, as a half-open breaker refuses calls beyond its probes. */
static int take_permit(lr_fleet *f, int64_t now) {
  long long p = atomic_load(&f->permits);
  while (p > 0)
    if (atomic_compare_exchange_weak(&f->permits, &p, p - 1)) return LR_FLEET_PERMIT;
  long long asked = atomic_load(&f->permit_asked_at);
  if (asked != 0 && now - asked < f->set.sync_ms) return 0;
  atomic_store(&f->permit_asked_at, now);
  lr_fleet_ask_permit(f);
  return 0;
}

int lr_fleet_breaker_admits(lr_fleet *f, int first_attempt) {
  if (!f || !atomic_load(&f->breaker)) return LR_FLEET_LOCAL;
  lr_fleet_tell(f);
  int64_t now = lr_monotonic_coarse_ms();
  if (!lr_fleet_fresh(f, now)) return LR_FLEET_LOCAL;
  int state = atomic_load(&f->state);
  if (state == 0) return 1;
  if (state == 1) {
    long long redis_now = now + atomic_load(&f->clock_offset);
    if (redis_now - atomic_load(&f->opened_at) < atomic_load(&f->open_ms)) return 0;
  }
  /* half-open, or open with its period over (the fleet's next sync makes
   * it half-open): retries go on, a new call needs a permit */
  if (!first_attempt) return 1;
  return take_permit(f, now);
}

/* Back among this process's permits, for its next call to take (no round
 * trip: those left when the handle ends go back to the fleet, sync.c's
 * flush), never more than `probes`; none once the view is no longer
 * half-open (a sync clears them too). */
void lr_fleet_permit_give_back(lr_fleet *f) {
  if (!f || atomic_load(&f->state) != 2) return;
  long long p = atomic_load(&f->permits), most = atomic_load(&f->probes);
  while (p < most && !atomic_compare_exchange_weak(&f->permits, &p, p + 1)) {
  }
}

void lr_fleet_view_get(lr_fleet *f, lr_fleet_view *v) {
  memset(v, 0, sizeof *v);
  if (!f) return;
  int64_t now = lr_monotonic_ms();
  v->health = (lr_fleet_health)atomic_load(&f->health);
  v->fresh = lr_fleet_fresh(f, now);
  v->tokens = (double)lr_fleet_tokens_milli(f) / 1000;
  v->breaker = atomic_load(&f->state);
  v->consecutive_failures = atomic_load(&f->fails);
  v->probes_left = atomic_load(&f->probes_left);
  window_now(f, &v->requests, &v->accepts);
  v->opened_at_ms = atomic_load(&f->opened_at);
  long long ok = atomic_load(&f->last_ok_ms);
  v->synced_ago = ok ? (double)(now - ok) / 1000 : -1;
  v->syncs = atomic_load(&f->syncs);
  long long held = lr_budget_lease_held(f);
  v->lease = (double)(held > 0 ? held : 0) / 1000;
  v->leased = (double)atomic_load(&f->leased) / 1000;
  v->sync_failures = atomic_load(&f->sync_failures);
  lr_fmt(v->where, sizeof v->where, "%s", f->url.redacted);
  lr_fmt(v->key, sizeof v->key, "%s", f->key);
  if (lr_fleet_owned(f)) { /* a fork's child: the parent's worker may have held it */
    pthread_mutex_lock(&f->note_lock);
    lr_fmt(v->detail, sizeof v->detail, "%s", f->detail);
    pthread_mutex_unlock(&f->note_lock);
  }
}

unsigned long long lr_fleet_round_trips(lr_fleet *f) {
  return f ? (unsigned long long)atomic_load(&f->commands) : 0;
}
