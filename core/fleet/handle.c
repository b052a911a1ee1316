/* fleet.c: the fleet handle: its settings, its health and its one
 * connection (the sync paths are in sync.c).
 *
 * Health: UNKNOWN until the first round trip, then HEALTHY or DEGRADED.
 * Any failure (a timeout, a refusal, a closed connection) degrades at once:
 * the connection is dropped (a late reply would be out of step), decisions
 * fall back to the local guards, and reconnects wait a jittered backoff
 * doubling from reconnect_min_ms to reconnect_max_ms, so a dead Redis costs
 * one connect attempt per backoff, not one per call.  The log callback
 * hears of each change once. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fleet_internal.h"

#define MILLI 1000

const char *lr_fleet_strerror(lr_fleet_code code) {
  switch (code) {
  case LR_FLEET_OK: return "ok";
  case LR_FLEET_E_ARG: return "bad argument";
  case LR_FLEET_E_NOMEM: return "out of memory";
  case LR_FLEET_E_CONNECT: return "cannot reach Redis";
  case LR_FLEET_E_TIMEOUT: return "Redis did not answer in time";
  case LR_FLEET_E_AUTH: return "Redis refused the credentials";
  case LR_FLEET_E_REFUSED: return "Redis refused the command";
  case LR_FLEET_E_PROTOCOL: return "unexpected reply from Redis";
  case LR_FLEET_E_BACKOFF: return "Redis unavailable, waiting before reconnecting";
  case LR_FLEET_E_CANCELLED: return "cancelled";
  case LR_FLEET_E_FORKED:
    return "a fork's child shares no fleet (the connection is its parent's): load the policy "
           "again";
  }
  return "unknown error";
}

const char *lr_fleet_health_name(lr_fleet_health h) {
  switch (h) {
  case LR_FLEET_UNKNOWN: return "unknown";
  case LR_FLEET_HEALTHY: return "fleet";
  case LR_FLEET_DEGRADED: return "degraded";
  }
  return "unknown";
}

void lr_fleet_settings_init(lr_fleet_settings *s) {
  memset(s, 0, sizeof *s);
  s->max_tokens = 10;
  s->token_ratio = 0.1;
  s->failures = 5;
  s->open_seconds = 30;
  s->probes = 1;
  s->connect_timeout_ms = 250;
  s->command_timeout_ms = 100;
  s->sync_ms = 200;
  s->reconnect_min_ms = 500;
  s->reconnect_max_ms = 30000;
  s->ttl_seconds = 3600;
}

static int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The guard numbers, read by decisions without a lock. */
static void install_guards(lr_fleet *f, const lr_fleet_settings *s) {
  atomic_store(&f->budget, s->budget != 0);
  atomic_store(&f->breaker, s->breaker != 0);
  atomic_store(&f->failures, s->failures);
  atomic_store(&f->probes, s->probes);
  atomic_store(&f->max_milli, llround(s->max_tokens * MILLI));
  atomic_store(&f->ratio_milli, llround(s->token_ratio * MILLI));
  atomic_store(&f->reserve_milli, llround(s->reserve * MILLI));
  atomic_store(&f->open_ms, llround(lr_fleet_open_seconds(s->open_seconds) * 1000));
  /* the throttle's buckets: a tenth of its window each, in whole ms */
  int throttle = s->throttle && s->throttle_k > 0 && s->throttle_window > 0;
  long long bucket = throttle ? llround(s->throttle_window * 100) : 0;
  atomic_store(&f->k_milli, throttle ? llround(s->throttle_k * MILLI) : 0);
  atomic_store(&f->bucket_ms, throttle && bucket < 1 ? 1 : bucket);
  atomic_store(&f->cost_milli, llround(s->throttle_cost * MILLI));
  atomic_store(&f->throttle, throttle);
}

/* The rest is fixed for the handle's life: read without a lock. */
static void install(lr_fleet *f, const lr_fleet_settings *s) {
  lr_fleet_settings c = *s;
  c.connect_timeout_ms = clamp_int(c.connect_timeout_ms, 1, 60000);
  c.command_timeout_ms = clamp_int(c.command_timeout_ms, 1, 60000);
  c.sync_ms = clamp_int(c.sync_ms, 1, 60000);
  if (c.stale_ms <= 0) c.stale_ms = 10 * c.sync_ms;
  c.reconnect_min_ms = clamp_int(c.reconnect_min_ms, 1, 3600000);
  c.reconnect_max_ms = clamp_int(c.reconnect_max_ms, c.reconnect_min_ms, 3600000);
  c.ttl_seconds = clamp_int(c.ttl_seconds, 1, 30 * 86400);
  c.member = f->member;
  f->set = c;
  install_guards(f, s);
}

/* The rate limiter's settings, under its lock (redis_rate.c uses them). */
void lr_fleet_rate_install(lr_fleet *f, const lr_fleet_settings *s) {
  if (!lr_fleet_owned(f)) return; /* a fork's child leases no slot (redis_rate.c) */
  int on = s->rate && s->rate_limit > 0 && s->rate_burst >= 1;
  pthread_mutex_lock(&f->rate_lock);
  if (!on || s->rate_limit != f->rate_limit || s->rate_burst != f->rate_burst)
    lr_lease_init(&f->lease), f->rate_first = 0; /* slots of other settings */
  f->rate_limit = on ? s->rate_limit : 0;
  f->rate_burst = on ? s->rate_burst : 1;
  pthread_mutex_unlock(&f->rate_lock);
  atomic_store(&f->rate, on);
}

/* Only the guard numbers change: timeouts, the log and the member are
 * the handle's for life (a new URL or key is a new handle). */
void lr_fleet_configure(lr_fleet *f, const lr_fleet_settings *s) {
  if (!f || !s) return;
  install_guards(f, s);
  lr_fleet_rate_install(f, s);
}

static lr_fleet_code check_key(const char *key, char *err, size_t errlen) {
  size_t n = key ? strlen(key) : 0;
  int ok = n >= 1 && n <= 200;
  for (size_t i = 0; ok && i < n; i++) {
    unsigned char ch = (unsigned char)key[i];
    ok = ch > 0x20 && ch != 0x7f && ch != '{' && ch != '}';
  }
  if (ok) return LR_FLEET_OK;
  lr_fmt(err, errlen,
         "fleet key: expected 1 to 200 printable bytes without "
         "spaces, '{' or '}' (the policy's name, or fleet.key)");
  return LR_FLEET_E_ARG;
}

/* HOST:PID:N, N this process's count of handles: each handle's lease
 * totals are its own (redis_script.c charges a member the growth of its
 * total), so two handles on one key (two policies naming it, a reload's
 * new handle beside the old one's last flush) must never share a name. */
static void default_member(lr_fleet *f) {
  static atomic_uint handles;
  char host[64] = "host";
  if (gethostname(host, sizeof host) != 0) strcpy(host, "host");
  host[sizeof host - 1] = '\0';
  lr_fmt(f->owner, sizeof f->owner, "%s:%ld", host, (long)getpid());
  lr_fmt(f->member, sizeof f->member, "%s:%u", f->owner, atomic_fetch_add(&handles, 1) + 1);
}

lr_fleet_code lr_fleet_new(const char *url, const char *key, const lr_fleet_settings *s,
                           lr_fleet **out, char *err, size_t errlen) {
  if (!out || !s) return LR_FLEET_E_ARG;
  *out = NULL;
  lr_redis_url u;
  lr_fleet_code rc = lr_redis_url_parse(url, &u, err, errlen);
  if (rc == LR_FLEET_OK) rc = check_key(key, err, errlen);
  if (rc != LR_FLEET_OK) return rc;
  lr_fleet *f = calloc(1, sizeof *f);
  if (!f) return LR_FLEET_E_NOMEM;
  f->forks = lr_fleet_forks(); /* first: lr_fleet_owned is asked from here on */
  f->url = u;
  lr_fmt(f->key, sizeof f->key, "luaretry:{%s}", key);
  lr_fmt(f->procs_key, sizeof f->procs_key, "luaretry:{%s}:procs", key);
  lr_fmt(f->rate_key, sizeof f->rate_key, "luaretry:{%s}:rate", key);
  lr_fmt(f->leases_key, sizeof f->leases_key, "luaretry:{%s}:leases", key);
  lr_fmt(f->lexp_key, sizeof f->lexp_key, "luaretry:{%s}:lexp", key);
  pthread_mutex_init(&f->rate_lock, NULL);
  lr_lease_init(&f->lease);
  lr_fleet_rate_install(f, s);
  if (s->member && s->member[0]) {
    lr_fmt(f->member, sizeof f->member, "%s", s->member);
    lr_fmt(f->owner, sizeof f->owner, "%s", s->member);
  } else {
    default_member(f);
  }
  install(f, s);
  pthread_mutex_init(&f->io, NULL);
  pthread_mutex_init(&f->note_lock, NULL);
  pthread_mutex_init(&f->say_lock, NULL);
  pthread_mutex_init(&f->wlock, NULL);
  pthread_cond_init(&f->wcond, NULL);
  lr_waiter_init(&f->stopper);
  lr_conn_init(&f->conn);
  f->conn.sent = &f->commands;
  f->conn.slot = lr_cluster_slot(f->key, strlen(f->key)); /* every key shares its tag */
  f->backoff_ms = f->set.reconnect_min_ms;
  f->rng = (uint64_t)lr_monotonic_ms() * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid() ^
           (uint64_t)(uintptr_t)f;
  *out = f;
  return LR_FLEET_OK;
}

void lr_fleet_free(lr_fleet *f) {
  if (!f) return;
  if (!lr_fleet_owned(f)) {
    /* a fork's child: the parent's threads (the worker, a name lookup)
     * are not here and may have held its locks and conditions when it
     * forked: only the memory and the descriptor are the child's */
    if (f->conn.fd >= 0) close(f->conn.fd);
    free(f);
    return;
  }
  lr_fleet_worker_stop(f);
  lr_fleet_tell(f);
  lr_conn_free(&f->conn);
  pthread_mutex_destroy(&f->io);
  pthread_mutex_destroy(&f->note_lock);
  pthread_mutex_destroy(&f->say_lock);
  pthread_mutex_destroy(&f->wlock);
  pthread_cond_destroy(&f->wcond);
  lr_waiter_close(&f->stopper);
  pthread_mutex_destroy(&f->rate_lock);
  free(f);
}

/* ---- health */

/* Neither in a fork's child (its calls never reach Redis; the parent's
 * worker may have held note_lock at the fork). */
static void note(lr_fleet *f, const char *detail) {
  if (!lr_fleet_owned(f)) return;
  pthread_mutex_lock(&f->note_lock);
  lr_fmt(f->detail, sizeof f->detail, "%s", detail);
  pthread_mutex_unlock(&f->note_lock);
}

/* fmt takes the key, the redacted URL and detail, in that order.  Noted
 * here, told by lr_fleet_tell on a caller's thread: the worker never
 * calls into the host.  When more changes wait than there is room for,
 * the latest replaces the last one. */
static void say(lr_fleet *f, const char *fmt, const char *detail) {
  if (!f->set.log || !lr_fleet_owned(f)) return;
  char line[1024];
  lr_fmt(line, sizeof line, fmt, f->key, f->url.redacted, detail);
  lr_redis_url_scrub(&f->url, line);
  pthread_mutex_lock(&f->note_lock);
  int i = f->said_count < LR_FLEET_SAID_MAX ? f->said_count++ : LR_FLEET_SAID_MAX - 1;
  lr_fmt(f->said[i], sizeof f->said[i], "%s", line);
  atomic_store(&f->said_pending, 1);
  pthread_mutex_unlock(&f->note_lock);
}

void lr_fleet_tell(lr_fleet *f) {
  if (!f || !atomic_load_explicit(&f->said_pending, memory_order_relaxed)) return;
  if (!lr_fleet_owned(f)) return; /* the parent's worker may have held note_lock */
  if (pthread_mutex_trylock(&f->say_lock) != 0) return; /* another thread tells them */
  char lines[LR_FLEET_SAID_MAX][1024];
  pthread_mutex_lock(&f->note_lock);
  int n = f->said_count;
  for (int i = 0; i < n; i++) memcpy(lines[i], f->said[i], sizeof lines[i]);
  f->said_count = 0;
  atomic_store(&f->said_pending, 0);
  pthread_mutex_unlock(&f->note_lock);
  for (int i = 0; i < n; i++) f->set.log(f->set.log_ud, lines[i]);
  pthread_mutex_unlock(&f->say_lock);
}

/* Full jitter over the upper half: processes that lost Redis together do
 * not all come back in the same millisecond. */
static int64_t jittered(lr_fleet *f, int64_t ms) {
  f->rng ^= f->rng << 13, f->rng ^= f->rng >> 7, f->rng ^= f->rng << 17;
  return ms / 2 + (int64_t)(f->rng % (uint64_t)(ms / 2 + 1));
}

void lr_fleet_fail_locked(lr_fleet *f, lr_fleet_code rc, const char *detail) {
  char text[512];
  lr_fmt(text, sizeof text, "%s", detail && detail[0] ? detail : lr_fleet_strerror(rc));
  lr_redis_url_scrub(&f->url, text);
  lr_conn_close(&f->conn);
  int64_t now = lr_monotonic_ms();
  f->next_connect_at = now + jittered(f, f->backoff_ms);
  f->backoff_ms =
    f->backoff_ms * 2 > f->set.reconnect_max_ms ? f->set.reconnect_max_ms : f->backoff_ms * 2;
  atomic_fetch_add(&f->sync_failures, 1);
  note(f, text);
  if (atomic_exchange(&f->health, LR_FLEET_DEGRADED) != LR_FLEET_DEGRADED)
    say(f, "fleet guards %s: %s: %s; local guards decide until Redis is back", text);
}

/* Less than this for a whole round trip says nothing of Redis's health. */
#define FAIR_MS     10
/* A reply later than this (and eight usual round trips): Redis is slower
 * than usual. */
#define PATIENCE_MS 50

int64_t lr_fleet_patience_ms(lr_fleet *f) {
  int64_t patience = 8 * (int64_t)atomic_load(&f->rtt_us) / 1000; /* the mean, in us */
  return patience < PATIENCE_MS ? PATIENCE_MS : patience;
}

void lr_fleet_failed_locked(lr_fleet *f, lr_fleet_code rc, const char *detail, int64_t start,
                            int64_t limit_ms) {
  int unfair = rc == LR_FLEET_E_TIMEOUT && limit_ms > 0 && limit_ms - start < FAIR_MS;
  /* the flush's round trip after such a stop, given one patience: no reply
   * in it is as late as the cut one would have been */
  int last_word = rc == LR_FLEET_E_TIMEOUT && f->cut_early && atomic_load(&f->stopper.cancelled);
  if (rc != LR_FLEET_E_CANCELLED && !unfair && !last_word) {
    lr_fleet_fail_locked(f, rc, detail);
    return;
  }
  /* Cut short after waiting past the patience a call gives the rate's
   * reply: Redis is slow, as a call would have found.  Else a free that
   * cut the worker's round trip short would reconnect for the last
   * give-back and wait a whole command timeout on the same Redis. */
  int64_t waited = lr_monotonic_ms() - start;
  if ((rc == LR_FLEET_E_CANCELLED && waited > lr_fleet_patience_ms(f)) || last_word) {
    char why[120];
    lr_fmt(
      why, sizeof why, "no reply in %lld ms (%s)", (long long)waited,
      last_word ? "the last counts, after a round trip cut short" : "the round trip was cut short");
    lr_conn_close(&f->conn);
    /* The handle's free cut it: the process is ending and no call is left
     * to decide, so "local guards decide" would only be a run's last,
     * false word (a busy machine's Redis answers late).  Degraded all
     * the same, for the give-back that follows. */
    if (atomic_load(&f->stopper.cancelled)) {
      atomic_store(&f->health, LR_FLEET_DEGRADED);
      note(f, why);
    } else {
      lr_fleet_slow(f, why);
    }
    return;
  }
  /* the call gave up, or its deadline left Redis no fair time to answer:
   * health and backoff stay as they were.  So did a free that cut the
   * worker short before the patience: Redis may be stalled, or only busy
   * (on a loaded machine the patience, eight usual round trips, is long),
   * so the flush that follows gets one patience, not a command timeout. */
  if (rc == LR_FLEET_E_CANCELLED && atomic_load(&f->stopper.cancelled)) f->cut_early = 1;
  lr_conn_close(&f->conn);
}

void lr_fleet_succeeded_locked(lr_fleet *f, const lr_fleet_reply *r, int64_t now) {
  atomic_store(&f->tokens, r->tokens);
  atomic_store(&f->state, (int)r->state);
  atomic_store(&f->fails, (int)r->fails);
  long long period = atomic_exchange(&f->opened_at, r->opened_at);
  atomic_store(&f->probes_left, (int)r->probes_left);
  /* a permit is its half-open period's alone: the fleet renewed them
   * (opened_at moved on) or left half-open */
  if (r->state != 2 || r->opened_at != period) atomic_store(&f->permits, 0);
  atomic_store(&f->fleet_requests, r->requests);
  atomic_store(&f->fleet_accepts, r->accepts);
  atomic_store(&f->clock_offset, r->now_ms - now);
  atomic_store(&f->last_ok_ms, now);
  atomic_fetch_add(&f->syncs, 1);
  lr_fleet_healthy_locked(f);
}

/* Healthy and synced within stale_ms: the view may decide. */
int lr_fleet_fresh(lr_fleet *f, int64_t now) {
  return atomic_load_explicit(&f->health, memory_order_acquire) == LR_FLEET_HEALTHY &&
         now - atomic_load_explicit(&f->last_ok_ms, memory_order_relaxed) <= f->set.stale_ms;
}

void lr_fleet_slow(lr_fleet *f, const char *detail) {
  if (atomic_exchange(&f->health, LR_FLEET_DEGRADED) == LR_FLEET_DEGRADED) return;
  note(f, detail);
  say(f, "fleet guards %s: %s: %s; local guards decide until Redis is back", detail);
}

void lr_fleet_healthy_locked(lr_fleet *f) {
  f->backoff_ms = f->set.reconnect_min_ms;
  if (atomic_exchange(&f->health, LR_FLEET_HEALTHY) == LR_FLEET_DEGRADED) {
    note(f, "");
    say(f, "fleet guards %s: %s: back%s, fleet-wide again", "");
  }
}

/* ---- the connection */

static int64_t earliest(int64_t a, int64_t limit) { return limit > 0 && limit < a ? limit : a; }

lr_fleet_code lr_fleet_connect_locked(lr_fleet *f, int force, int64_t *deadline, char *err,
                                      size_t errlen) {
  int64_t limit = *deadline, now = lr_monotonic_ms();
  *deadline = earliest(now + f->set.command_timeout_ms, limit);
  if (f->conn.fd >= 0) return LR_FLEET_OK;
  if (!force && now < f->next_connect_at) {
    lr_fmt(err, errlen, "%s", lr_fleet_strerror(LR_FLEET_E_BACKOFF));
    return LR_FLEET_E_BACKOFF;
  }
  *deadline = limit;
  lr_fleet_code rc =
    lr_redis_open(&f->conn, &f->url, earliest(now + f->set.connect_timeout_ms, limit),
                  f->set.command_timeout_ms, deadline, err, errlen);
  /* no SCRIPT LOAD: the scripts go by EVALSHA with SHAs computed here,
   * and the first one's error says if this server or user runs none */
  if (rc != LR_FLEET_OK) {
    lr_fleet_failed_locked(f, rc, err, now, limit);
    return rc;
  }
  if (atomic_load(&f->health) == LR_FLEET_DEGRADED) {
    /* what was counted while Redis was away is old news: the local
     * guards had it; the fleet goes on from now */
    atomic_store(&f->spent, 0), atomic_store(&f->earned, 0);
    atomic_store(&f->trail, 0), atomic_store(&f->resets, 0);
    atomic_store(&f->requests, 0), atomic_store(&f->accepts, 0);
    atomic_store(&f->throttled, 0);
  }
  return LR_FLEET_OK;
}
