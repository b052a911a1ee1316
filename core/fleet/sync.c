/* sync.c: the two ways a batch of deltas reaches Redis.
 *
 *  - lr_fleet_sync_now, the failure path's: a round trip under the io lock,
 *    bounded by the connect and command deadlines.
 *  - lr_fleet_maybe_sync, the success path's: never waits.  Once per sync
 *    period, whoever notices first (try-lock) sends the batch without
 *    waiting for the reply (pipelined); a later caller picks the reply up
 *    when it has arrived.  No thread of our own: the calls themselves
 *    drive it, so an idle process sends nothing.
 *
 * The batch is a handful of atomic counters that lr_fleet_record adds to
 * and a sync swaps for zeros, so recording never takes a lock. */
#include <string.h>

#include <hiredis.h>

#include "fleet_internal.h"

static void take_batch(lr_fleet *f, lr_fleet_batch *b) {
  b->spent = atomic_exchange(&f->spent, 0);
  b->earned = atomic_exchange(&f->earned, 0);
  b->resets = atomic_exchange(&f->resets, 0);
  b->trail = atomic_exchange(&f->trail, 0);
  b->requests = atomic_exchange(&f->requests, 0);
  b->accepts = atomic_exchange(&f->accepts, 0);
  b->throttled = atomic_exchange(&f->throttled, 0);
  b->want = 0;
}

static void give_back(lr_fleet *f, const lr_fleet_batch *b) {
  atomic_fetch_add(&f->spent, b->spent);
  atomic_fetch_add(&f->earned, b->earned);
  atomic_fetch_add(&f->resets, b->resets);
  atomic_fetch_add(&f->trail, b->trail);
  atomic_fetch_add(&f->requests, b->requests);
  atomic_fetch_add(&f->accepts, b->accepts);
  atomic_fetch_add(&f->throttled, b->throttled);
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

/* The reply to maybe_sync's batch: applied, or the batch handed back to
 * the next one when the server had forgotten the script. */
static lr_fleet_code settle_inflight(lr_fleet *f, redisReply *r, char *err, size_t errlen) {
  lr_fleet_reply out;
  int noscript = 0;
  lr_fleet_code rc = lr_redis_script_decode(&f->script, &f->url, r, &f->inflight_limits, 0, &out,
                                            &noscript, err, errlen);
  f->inflight = 0;
  /* the batch's deltas move from inflight_net into tokens (or back into
   * the next batch): written before inflight_net is cleared, so that a
   * budget decision meanwhile counts them twice for a moment, never not */
  if (noscript)
    give_back(f, &f->inflight_batch);
  else if (rc == LR_FLEET_OK)
    lr_fleet_succeeded_locked(f, &out, lr_monotonic_ms());
  atomic_store(&f->inflight_net, 0);
  atomic_store(&f->inflight_requests, 0), atomic_store(&f->inflight_accepts, 0);
  return noscript ? LR_FLEET_OK : rc;
}

lr_fleet_code lr_fleet_drain_locked(lr_fleet *f, int64_t deadline_ms, char *err, size_t errlen) {
  if (!f->inflight) return LR_FLEET_OK;
  redisReply *r = NULL;
  lr_fleet_code rc = lr_conn_read(&f->conn, deadline_ms, &r, err, errlen);
  if (rc == LR_FLEET_OK && r) rc = settle_inflight(f, r, err, errlen);
  if (r) freeReplyObject(r);
  return rc;
}

/* One round trip, all of it (a reconnect's too) within the connect and
 * command timeouts and limit_ms (0: none); a cancel of w ends it. */
static lr_fleet_code sync_locked(lr_fleet *f, long long want, long long *granted, int64_t limit_ms,
                                 lr_waiter *w) {
  char err[300] = "";
  int64_t deadline = limit_ms, start = lr_monotonic_ms();
  f->conn.cancel = w;
  lr_fleet_code rc = lr_fleet_connect_locked(f, 0, &deadline, err, sizeof err);
  if (rc != LR_FLEET_OK) {
    f->conn.cancel = NULL;
    return rc;
  }
  rc = lr_fleet_drain_locked(f, deadline, err, sizeof err);
  lr_fleet_batch b;
  lr_fleet_limits l;
  lr_fleet_reply out;
  take_batch(f, &b);
  b.want = want;
  limits_of(f, &l);
  const char *keys[2] = { f->key, f->procs_key };
  f->last_sent_at = lr_monotonic_ms();
  if (rc == LR_FLEET_OK)
    rc = lr_redis_script_run(&f->script, &f->conn, &f->url, keys, f->member, &l, &b, deadline, &out,
                             err, sizeof err);
  f->conn.cancel = NULL;
  if (rc != LR_FLEET_OK) {
    lr_fleet_failed_locked(f, rc, err, start, limit_ms); /* the batch is dropped: see below */
    return rc;
  }
  lr_fleet_succeeded_locked(f, &out, lr_monotonic_ms());
  if (granted) *granted = out.granted;
  return LR_FLEET_OK;
}

/* A failed round trip drops its batch: after a timeout nobody knows
 * whether it was applied, and counting it twice would spend the fleet's
 * budget for outcomes that did not happen.  The local guards have it. */
lr_fleet_code lr_fleet_sync_now(lr_fleet *f) {
  if (!f) return LR_FLEET_E_ARG;
  pthread_mutex_lock(&f->io);
  lr_fleet_code rc = sync_locked(f, 0, NULL, 0, NULL);
  pthread_mutex_unlock(&f->io);
  atomic_store(&f->next_sync_at, lr_monotonic_ms() + f->set.sync_ms);
  return rc;
}

static int batch_empty(lr_fleet *f) {
  return !atomic_load(&f->spent) && !atomic_load(&f->earned) && !atomic_load(&f->resets) &&
         !atomic_load(&f->trail) && !atomic_load(&f->requests) && !atomic_load(&f->accepts) &&
         !atomic_load(&f->throttled);
}

/* Nothing to send and nothing owed: another thread's round trip (or a
 * batch's reply) since this process's last outcome made the view as
 * current as one of our own would. */
lr_fleet_code lr_fleet_refresh(lr_fleet *f) { return lr_fleet_refresh_by(f, 0, NULL); }

lr_fleet_code lr_fleet_refresh_by(lr_fleet *f, int64_t limit_ms, lr_waiter *w) {
  if (!f) return LR_FLEET_E_ARG;
  long long ok = atomic_load(&f->last_ok_ms);
  if (ok && lr_monotonic_ms() - ok < f->set.sync_ms &&
      atomic_load(&f->health) == LR_FLEET_HEALTHY && batch_empty(f) &&
      atomic_load(&f->inflight_net) == 0 && atomic_load(&f->inflight_requests) == 0)
    return LR_FLEET_OK;
  if (limit_ms > 0 && lr_monotonic_ms() >= limit_ms) return LR_FLEET_E_TIMEOUT;
  pthread_mutex_lock(&f->io);
  lr_fleet_code rc = sync_locked(f, 0, NULL, limit_ms, w);
  pthread_mutex_unlock(&f->io);
  atomic_store(&f->next_sync_at, lr_monotonic_ms() + f->set.sync_ms);
  return rc;
}

lr_fleet_code lr_fleet_flush(lr_fleet *f) {
  if (!f) return LR_FLEET_E_ARG;
  pthread_mutex_lock(&f->io);
  lr_fleet_code rc = LR_FLEET_OK;
  if (f->conn.fd >= 0 && atomic_load(&f->health) == LR_FLEET_HEALTHY) {
    if (f->inflight || !batch_empty(f)) rc = sync_locked(f, 0, NULL, 0, NULL);
  }
  pthread_mutex_unlock(&f->io);
  return rc;
}

/* With the io lock: one probe permit asked in a round trip. */
lr_fleet_code lr_fleet_ask_permit_locked(lr_fleet *f, long long *granted, int64_t limit_ms,
                                         lr_waiter *w) {
  return sync_locked(f, 1, granted, limit_ms, w);
}

/* maybe_sync's send: the batch goes without waiting for the reply. */
static void send_async(lr_fleet *f, int64_t now) {
  char err[300] = "";
  lr_fleet_limits l;
  limits_of(f, &l);
  f->inflight_limits = l;
  take_batch(f, &f->inflight_batch);
  const char *keys[2] = { f->key, f->procs_key };
  lr_fleet_code rc =
    lr_redis_script_append(&f->script, &f->conn, keys, f->member, &l, &f->inflight_batch);
  if (rc == LR_FLEET_OK) rc = lr_conn_flush(&f->conn, 0, err, sizeof err);
  if (rc != LR_FLEET_OK) {
    lr_fleet_fail_locked(f, rc, err);
    return;
  }
  f->inflight = 1;
  f->inflight_at = f->last_sent_at = now;
  const lr_fleet_batch *b = &f->inflight_batch;
  atomic_store(&f->inflight_net, b->earned - b->spent - b->throttled * l.cost_milli);
  atomic_store(&f->inflight_requests, b->requests);
  atomic_store(&f->inflight_accepts, b->accepts);
}

void lr_fleet_maybe_sync(lr_fleet *f) {
  if (f) lr_fleet_maybe_sync_at(f, lr_monotonic_coarse_ms());
}

void lr_fleet_maybe_sync_at(lr_fleet *f, int64_t now) {
  if (!f || now < atomic_load_explicit(&f->next_sync_at, memory_order_relaxed)) return;
  now = lr_monotonic_ms();
  if (pthread_mutex_trylock(&f->io) != 0) return;
  int64_t next = now + f->set.sync_ms;
  if (f->conn.fd >= 0 && atomic_load(&f->health) == LR_FLEET_HEALTHY) {
    char err[300] = "";
    lr_fleet_code rc = lr_fleet_drain_locked(f, 0, err, sizeof err); /* no wait */
    if (rc == LR_FLEET_OK && f->inflight && now - f->inflight_at > f->set.command_timeout_ms) {
      rc = LR_FLEET_E_TIMEOUT;
      lr_fmt(err, sizeof err, "no reply in time");
    }
    if (rc != LR_FLEET_OK)
      lr_fleet_fail_locked(f, rc, err);
    else if (!f->inflight && now - f->last_sent_at >= f->set.sync_ms)
      send_async(f, now);
    next = f->inflight ? now + 1 /* look for the reply soon */
                       : f->last_sent_at + f->set.sync_ms;
  }
  atomic_store(&f->next_sync_at, next);
  pthread_mutex_unlock(&f->io);
}
