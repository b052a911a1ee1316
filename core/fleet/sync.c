/* sync.c: how a batch of deltas reaches Redis.
 *
 *  - the worker's (worker.c): kicked once per sync period by outcomes
 *    (lr_fleet_maybe_sync), at once by a failure the budget's block does
 *    not pay for and before a retry when the view is not recent and no
 *    block pays for it (lr_fleet_refresh_soon; budget_lease.c says when),
 *    and by its own timer to give a block back; it makes the round trip,
 *    bounded by the connect and command timeouts, while the caller goes
 *    on.  An idle process holding no block sends nothing.
 *  - lr_fleet_sync_now and lr_fleet_refresh, the same round trip on the
 *    caller's thread (tools, tests, a handle's last counts); a blocking
 *    call's before its retry (lr_fleet_refresh_by), which may carry the
 *    fleet reserve's question for that call (redis_script.c) and hands
 *    the answer back to it alone.  Neither refresh reconnects: while
 *    Redis is away they answer at once and kick the worker, whose
 *    reconnects wait the backoff (handle.c).
 *
 * The batch is a handful of atomic counters that lr_fleet_record adds to
 * and a sync swaps for zeros, so recording never takes a lock. */
#include <string.h>
#include <time.h>

#include <hiredis.h>

#include "fleet_internal.h"

static void take_batch(lr_fleet *f, lr_fleet_batch *b) {
  b->spent = atomic_exchange(&f->spent, 0);
  b->earned = atomic_exchange(&f->earned, 0);
  b->resets = atomic_exchange(&f->resets, 0);
  b->trail = atomic_exchange(&f->trail, 0);
  b->requests = atomic_exchange(&f->requests, 0);
  /* requests uncounted after theirs went: out of this batch's */
  long long owed = atomic_exchange(&f->unrequested, 0),
            paid = owed < b->requests ? owed : b->requests;
  b->requests -= paid;
  if (owed > paid) atomic_fetch_add(&f->unrequested, owed - paid);
  b->accepts = atomic_exchange(&f->accepts, 0);
  b->throttled = atomic_exchange(&f->throttled, 0);
  b->want = 0;
  b->rinterval_ms = b->rspan_ms = 0;
  b->returned = b->rperiod = 0;
}

/* The probe permits this process holds while the fleet is half-open,
 * in its view. */
static long long permits_held(lr_fleet *f) {
  return atomic_load(&f->state) == 2 ? atomic_load(&f->permits) : 0;
}

/* A closing handle's probe permits (none of its calls will take them:
 * one handed back by a throttling answer, one the worker brought): back
 * to the fleet with its last batch, for the next process's probe, in the
 * half-open period they are of (the script takes them in that period
 * only, never beyond `probes`).  A batch lost loses them: the fleet
 * renews permits never reported after open_seconds. */
static void permits_back(lr_fleet *f, lr_fleet_batch *b) {
  if (!f->lease_closing || !permits_held(f)) return;
  b->returned = atomic_exchange(&f->permits, 0);
  b->rperiod = atomic_load(&f->opened_at);
}

static void limits_of(lr_fleet *f, lr_fleet_limits *l) {
  l->budget = atomic_load(&f->budget);
  l->breaker = atomic_load(&f->breaker);
  l->ratio_milli = atomic_load(&f->ratio_milli);
  l->max_milli = atomic_load(&f->max_milli);
  /* without a breaker the fleet's never opens (its state would mislead) */
  l->failures = atomic_load(&f->breaker) ? atomic_load(&f->failures) : 0;
  l->open_ms = atomic_load(&f->open_ms);
  l->probes = atomic_load(&f->probes);
  l->cost_milli = atomic_load(&f->cost_milli);
  l->k_milli = atomic_load(&f->k_milli);
  l->reserve_milli = atomic_load(&f->reserve_milli);
  l->bucket_ms = atomic_load(&f->throttle) ? atomic_load(&f->bucket_ms) : 0;
  l->ttl_ms = (long long)f->set.ttl_seconds * 1000;
  if (l->ttl_ms < 2 * l->open_ms + 60000) l->ttl_ms = 2 * l->open_ms + 60000;
  if (l->ttl_ms < 10 * l->bucket_ms + 60000) l->ttl_ms = 10 * l->bucket_ms + 60000;
}

/* One round trip, all of it (a reconnect's too) within the connect and
 * command timeouts and limit_ms (0: none); a cancel of w ends it. */
static void work(lr_fleet *f, int work);

/* reserve (NULL: none): the reserve's question, for the calling call
 * (lr_fleet_refresh_by says what comes out). */
static lr_fleet_code sync_locked(lr_fleet *f, long long want, long long *granted, int64_t limit_ms,
                                 lr_waiter *w, int *reserve) {
  char err[512] = "";
  int64_t deadline = limit_ms, start = lr_monotonic_ms();
  f->conn.cancel = w;
  lr_fleet_code rc = lr_fleet_connect_locked(f, 0, &deadline, err, sizeof err);
  if (rc != LR_FLEET_OK) {
    f->conn.cancel = NULL;
    return rc;
  }
  lr_fleet_batch b;
  lr_fleet_limits l;
  lr_fleet_reply out;
  take_batch(f, &b);
  b.want = want;
  if (reserve) lr_fleet_reserve_ask(f, &b);
  permits_back(f, &b);
  lr_budget_lease_take(f, &b, lr_monotonic_ms());
  limits_of(f, &l);
  /* while it travels the batch still counts in this process's view (a
   * moment twice after the reply, never in neither) */
  atomic_store(&f->inflight_net, b.earned - b.spent - b.throttled * l.cost_milli);
  atomic_store(&f->inflight_requests, b.requests);
  atomic_store(&f->inflight_accepts, b.accepts);
  const char *keys[LR_FLEET_KEYS] = { f->key, f->procs_key, f->leases_key, f->lexp_key };
  f->last_sent_at = lr_monotonic_ms();
  rc = lr_redis_script_run(&f->script, &f->conn, &f->url, keys, f->member, f->owner, &l, &b,
                           deadline, &out, err, sizeof err);
  /* a cluster's MOVED or ASK: the batch was not applied; again, there */
  for (int redirects = 0; rc != LR_FLEET_OK && lr_cluster_again(&f->conn, &redirects);) {
    lr_conn_close(&f->conn);
    deadline = limit_ms;
    if (lr_fleet_connect_locked(f, 1, &deadline, err, sizeof err) != LR_FLEET_OK) {
      f->conn.cancel = NULL; /* said and counted by the connect */
      atomic_store(&f->inflight_net, 0);
      atomic_store(&f->inflight_requests, 0), atomic_store(&f->inflight_accepts, 0);
      return LR_FLEET_E_CONNECT;
    }
    rc = lr_redis_script_run(&f->script, &f->conn, &f->url, keys, f->member, f->owner, &l, &b,
                             deadline, &out, err, sizeof err);
  }
  lr_cluster_done(&f->conn);
  f->conn.cancel = NULL;
  if (rc == LR_FLEET_OK) {
    int64_t done = lr_monotonic_ms();
    lr_fleet_succeeded_locked(f, &out, done);
    lr_budget_lease_settle(f, &b, &out, work);
    long long rtt = (done - f->last_sent_at) * 1000, avg = atomic_load(&f->rtt_us);
    atomic_store(&f->rtt_us, avg ? (7 * avg + rtt) / 8 : rtt);
  }
  atomic_store(&f->inflight_net, 0);
  atomic_store(&f->inflight_requests, 0), atomic_store(&f->inflight_accepts, 0);
  if (rc != LR_FLEET_OK) {
    lr_fleet_failed_locked(f, rc, err, start, limit_ms); /* the batch is dropped: see below */
    return rc;
  }
  if (granted) *granted = out.granted;
  if (reserve && b.rinterval_ms > 0)
    *reserve = out.reserve == LR_RESERVE_TAKEN   ? 1
               : out.reserve == LR_RESERVE_SPENT ? 0
                                                 : LR_FLEET_LOCAL;
  return LR_FLEET_OK;
}

/* A failed round trip drops its batch: after a timeout nobody knows
 * whether it was applied, and counting it twice would spend the fleet's
 * budget for outcomes that did not happen.  The local guards have it. */
lr_fleet_code lr_fleet_sync_now(lr_fleet *f) {
  if (!f) return LR_FLEET_E_ARG;
  if (!lr_fleet_owned(f)) return LR_FLEET_E_FORKED; /* a fork's child: see worker.c */
  pthread_mutex_lock(&f->io);
  lr_fleet_code rc = sync_locked(f, 0, NULL, 0, NULL, NULL);
  pthread_mutex_unlock(&f->io);
  atomic_store(&f->next_sync_at, lr_monotonic_ms() + f->set.sync_ms);
  lr_fleet_tell(f);
  return rc;
}

lr_fleet_code lr_fleet_sync_to_call(lr_fleet *f) {
  if (!f) return LR_FLEET_E_ARG;
  if (!lr_fleet_owned(f)) return LR_FLEET_E_FORKED;
  long long granted = 0;
  pthread_mutex_lock(&f->io);
  lr_fleet_code rc = sync_locked(f, atomic_load(&f->breaker) ? 1 : 0, &granted, 0, NULL, NULL);
  pthread_mutex_unlock(&f->io);
  if (rc == LR_FLEET_OK && granted > 0) atomic_fetch_add(&f->permits, granted);
  atomic_store(&f->next_sync_at, lr_monotonic_ms() + f->set.sync_ms);
  lr_fleet_tell(f);
  return rc;
}

static int batch_empty(lr_fleet *f) {
  return !atomic_load(&f->spent) && !atomic_load(&f->earned) && !atomic_load(&f->resets) &&
         !atomic_load(&f->trail) && !atomic_load(&f->requests) && !atomic_load(&f->accepts) &&
         !atomic_load(&f->throttled);
}

/* Counts not sent, or a block of the budget's tokens Redis keeps for us
 * (or draws on it Redis may not have seen; io held). */
static int owed(lr_fleet *f) {
  return !batch_empty(f) || lr_budget_lease_held(f) != 0 || f->lease_redis > 0 ||
         atomic_load(&f->drawn) != f->lease_acked; /* draws Redis may not have seen */
}

/* Nothing to send and nothing owed: another thread's round trip (or the
 * worker's) since this process's last outcome made the view as current
 * as one of our own would.  Or a block of the budget's tokens pays for
 * the retry: what is left to send waits for the sync period. */
static int recent(lr_fleet *f) {
  if (lr_budget_lease_covers(f)) return 1;
  long long ok = atomic_load(&f->last_ok_ms);
  return ok && lr_monotonic_ms() - ok < f->set.sync_ms &&
         atomic_load(&f->health) == LR_FLEET_HEALTHY && batch_empty(f) &&
         atomic_load(&f->inflight_net) == 0 && atomic_load(&f->inflight_requests) == 0;
}

lr_fleet_code lr_fleet_refresh(lr_fleet *f) { return lr_fleet_refresh_by(f, 0, NULL, NULL); }

/* The io lock, which the worker may hold for its own round trip (this
 * call's failure's, often): waited for by limit_ms (0: none) and ended by
 * a cancel of w, in slices of 20 ms. */
static lr_fleet_code lock_by(lr_fleet *f, int64_t limit_ms, lr_waiter *w) {
  for (;;) {
    if (w && atomic_load(&w->cancelled)) return LR_FLEET_E_CANCELLED;
    int64_t now = lr_monotonic_ms(), until = now + 20;
    if (limit_ms > 0 && now >= limit_ms) return LR_FLEET_E_TIMEOUT;
    if (limit_ms > 0 && limit_ms < until) until = limit_ms;
    struct timespec ts = { (time_t)(until / 1000), (long)(until % 1000) * 1000000L };
    if (pthread_mutex_clocklock(&f->io, CLOCK_MONOTONIC, &ts) == 0) return LR_FLEET_OK;
  }
}

/* Redis lost: the reconnect is the worker's, after its backoff.  A
 * stopped Redis (SIGSTOP, a frozen VM) still accepts connections, so a
 * reconnect on the caller's thread waited a whole command timeout before
 * every retry while the local guards were deciding anyway. */
static lr_fleet_code lost(lr_fleet *f) {
  lr_fleet_refresh_soon(f);
  return LR_FLEET_E_BACKOFF;
}

static int degraded(lr_fleet *f) { return atomic_load(&f->health) == LR_FLEET_DEGRADED; }

lr_fleet_code lr_fleet_refresh_by(lr_fleet *f, int64_t limit_ms, lr_waiter *w, int *reserve) {
  if (reserve) *reserve = LR_FLEET_LOCAL;
  if (!f) return LR_FLEET_E_ARG;
  if (!lr_fleet_owned(f)) return LR_FLEET_E_FORKED;
  if (degraded(f)) return lost(f);
  /* The reserve's question needs a round trip whatever the view: it
   * rides on this sync, however recently the worker's landed (skipped,
   * the reserve's own script went instead, and which of the two went hung
   * on when the worker's sync came during the wait). */
  if (!reserve && recent(f)) return LR_FLEET_OK;
  lr_fleet_code rc = lock_by(f, limit_ms, w);
  if (rc != LR_FLEET_OK) return rc;
  if (!reserve && recent(f)) { /* the worker's round trip was this one */
    pthread_mutex_unlock(&f->io);
    return LR_FLEET_OK;
  }
  if (degraded(f)) { /* the worker's round trip failed meanwhile */
    pthread_mutex_unlock(&f->io);
    return lost(f);
  }
  rc = sync_locked(f, 0, NULL, limit_ms, w, reserve);
  pthread_mutex_unlock(&f->io);
  atomic_store(&f->next_sync_at, lr_monotonic_ms() + f->set.sync_ms);
  lr_fleet_tell(f);
  return rc;
}

void lr_fleet_refresh_soon(lr_fleet *f) {
  if (!f) return;
  lr_fleet_tell(f);
  if (!recent(f)) lr_fleet_kick(f, LR_WORK_SYNC, work);
}

/* Not in a fork's child: the connection is the parent's, and its worker
 * may have held io when the process forked. */
lr_fleet_code lr_fleet_flush(lr_fleet *f) {
  if (!f) return LR_FLEET_E_ARG;
  if (!lr_fleet_owned(f)) return LR_FLEET_OK;
  lr_fleet_worker_stop(f);
  pthread_mutex_lock(&f->io);
  lr_fleet_code rc = LR_FLEET_OK;
  f->lease_closing = 1; /* the block and the probe permits go back */
  /* healthy: connected, or the worker's round trip cut short just now
   * closed the connection (a new one is made: the block must go back) */
  if (atomic_load(&f->health) == LR_FLEET_HEALTHY && (owed(f) || permits_held(f)))
    rc = sync_locked(f, 0, NULL, f->cut_early ? lr_monotonic_ms() + lr_fleet_patience_ms(f) : 0,
                     NULL, NULL);
  pthread_mutex_unlock(&f->io);
  lr_fleet_tell(f);
  return rc;
}

/* The worker's: one round trip for what was asked (a permit's round trip
 * carries the batch too); work 0, its timer's: one when something is owed
 * (counts that waited for the sync period, a block nobody spends). */
static void work(lr_fleet *f, int work) {
  pthread_mutex_lock(&f->io);
  if (!work && !owed(f)) {
    pthread_mutex_unlock(&f->io);
    return;
  }
  if (!work) work = LR_WORK_SYNC;
  if (work & LR_WORK_PERMIT) {
    long long granted = 0;
    if (sync_locked(f, 1, &granted, 0, &f->stopper, NULL) == LR_FLEET_OK && granted > 0)
      atomic_fetch_add(&f->permits, granted);
  } else if (work & LR_WORK_SYNC) {
    sync_locked(f, 0, NULL, 0, &f->stopper, NULL);
  }
  pthread_mutex_unlock(&f->io);
  atomic_store(&f->next_sync_at, lr_monotonic_ms() + f->set.sync_ms);
}

void lr_fleet_ask_permit(lr_fleet *f) { lr_fleet_kick(f, LR_WORK_PERMIT, work); }

void lr_fleet_sync_within_period(lr_fleet *f, int64_t now) {
  lr_fleet_maybe_sync_at(f, now);
  int64_t next = atomic_load_explicit(&f->next_sync_at, memory_order_relaxed);
  int64_t armed = atomic_load_explicit(&f->wtimer_at, memory_order_relaxed);
  if (now < next && (!armed || armed > next)) lr_fleet_timer(f, next, work);
}

void lr_fleet_maybe_sync(lr_fleet *f) {
  if (f) lr_fleet_maybe_sync_at(f, lr_monotonic_coarse_ms());
}

/* Once per sync period the worker is asked for a round trip; the caller
 * goes on at once. */
void lr_fleet_maybe_sync_at(lr_fleet *f, int64_t now) {
  if (!f) return;
  lr_fleet_tell(f);
  if (now < atomic_load_explicit(&f->next_sync_at, memory_order_relaxed)) return;
  atomic_store(&f->next_sync_at, now + f->set.sync_ms);
  lr_fleet_kick(f, LR_WORK_SYNC, work);
}
