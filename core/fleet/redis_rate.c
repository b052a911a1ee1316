/* redis_rate.c: the fleet's rate limiter (the policy's fixed `rate`), one
 * GCRA for every process under "luaretry:{KEY}:rate", kept by a small
 * script of its own on Redis's clock (TIME: hosts' clocks need not agree).
 * A process leases a block of slots (the times the next tokens come) in
 * one round trip and spends them locally (engine/lease.c), so the request
 * path costs a round trip per block, not per attempt.  The block adapts to
 * the process's demand (doubled when spent, halved when slots went
 * unspent), at most a tenth of a second of the fleet's rate.
 *
 * It shares the handle's connection, health and log with the budget's
 * script: Redis down, slow, refusing or garbled degrades the handle (said
 * once) and the local limiter decides at once; while degraded nothing is
 * asked until the reconnect backoff allows. */
#include <math.h>
#include <string.h>

#include <hiredis.h>

#include "fleet_internal.h"

/* The arithmetic of lr_lease_grant (engine/lease.c) in µs.
 *   KEYS[1]  hash: tat (µs, Redis's clock), cfg, cfg_at, cfg_by
 *   ARGV     limit burst want horizon_us ttl_ms member cfg (horizon_us: no
 *            slot further ahead, LR_LEASE_HORIZON or the call's deadline)
 *   returns  {granted, now_us, b_us, retry_us}: slot j of the grant at
 *            max(now, b + j * 1e6 / limit); none: one fits in retry_us;
 *            or the error "LUARETRY_SETTINGS <cfg>" (nothing changed).
 * Settings agree as for the budget (redis_script.c): the first writer's
 * stand until nobody used them for a minute or their writer changes them.
 * Numbers go to Redis as %.17g text: a plain number would be cut to 14
 * digits, a tenth of a ms of Redis's clock in µs. */
const char LR_RATE_SCRIPT[] =
  "if redis.replicate_commands then redis.replicate_commands() end\n"
  "local t = redis.call('TIME')\n"
  "local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
  "local limit, burst, want = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])\n"
  "local horizon, ttl = tonumber(ARGV[4]), tonumber(ARGV[5])\n"
  "local h = redis.call('HMGET', KEYS[1], 'tat', 'cfg', 'cfg_at', 'cfg_by')\n"
  "if h[2] and h[2] ~= ARGV[7] and h[4] ~= ARGV[6] and now - (tonumber(h[3]) or 0) < 60000000 "
  "then\n"
  "  return redis.error_reply('LUARETRY_SETTINGS ' .. h[2])\n"
  "end\n"
  "local interval = 1000000 / limit\n"
  "local base = math.max(tonumber(h[1]) or 0, now)\n"
  "local b = base - (burst - 1) * interval\n"
  "local granted, retry = 0, 0\n"
  "if b <= now + horizon then\n"
  "  granted = math.min(want, math.floor((now + horizon - b) / interval) + 1)\n"
  "end\n"
  "if granted > 0 then base = base + granted * interval else retry = b - now - horizon end\n"
  "local function txt(x) return string.format('%.17g', x) end\n"
  "redis.call('HSET', KEYS[1], 'tat', txt(base), 'cfg', ARGV[7], 'cfg_at', txt(now),\n"
  "  'cfg_by', ARGV[6])\n"
  "redis.call('PEXPIRE', KEYS[1], ttl)\n"
  "return {granted, now, math.ceil(b), math.ceil(retry)}\n";

void lr_fleet_rate_cfg_text(double limit, long burst, char *buf, size_t size) {
  lr_fmt(buf, size, "rate.limit=%.17g rate.burst=%ld", limit, burst);
}

typedef struct {
  long long granted, now_us, b_us, retry_us;
} rate_reply;

typedef rate_ask_t rate_ask;

#define HORIZON_US ((long long)(LR_LEASE_HORIZON * 1e6))
#define NOW_US_MIN 1000000000000000LL /* 2001 */
#define NOW_US_MAX 7258118400000000LL /* 2200 */

/* What the script can answer to what was asked: anything else is a
 * broken reply (a proxy's, a stranger's), never used. */
static const char *out_of_range(const rate_reply *o, const rate_ask *a) {
  if (o->now_us < NOW_US_MIN || o->now_us > NOW_US_MAX) return "a time of day out of range";
  if (o->granted < 0 || o->granted > a->want) return "more slots than were asked";
  double interval = 1e6 / a->limit, tolerance = (double)(a->burst - 1) * interval;
  double b = (double)o->b_us, now = (double)o->now_us;
  if (b < now - tolerance - 2) return "a slot before the bucket could hold it";
  if (o->granted > 0 && (b > now + (double)a->horizon_us + 1 || o->retry_us != 0))
    return "a slot beyond the horizon";
  /* others' slots reach at most the longest horizon and a block ahead */
  if (o->granted == 0 && (o->retry_us < 0 || (double)o->retry_us > lr_rate_wait_max_us(interval)))
    return "a wait for a slot out of range";
  /* none granted: the next slot is where the wait says (b = now + horizon
   * + retry, each rounded up), so it is as bounded as the wait; a slot
   * centuries ahead would refuse every call at once */
  if (o->granted == 0 && fabs(b - (now + (double)a->horizon_us + (double)o->retry_us)) > 2)
    return "a next slot that does not agree with its wait";
  return NULL;
}

static lr_fleet_code decode(lr_fleet *f, const redisReply *r, const rate_ask *a, rate_reply *o,
                            char *err, size_t errlen) {
  if (r->type == REDIS_REPLY_ERROR) {
    char text[204];
    lr_reply_quote_text(&f->url, r->str ? r->str : "", r->str ? r->len : 0, text, sizeof text);
    if (r->str && strncmp(r->str, "LUARETRY_SETTINGS ", 18) == 0) {
      char ours[120];
      lr_fleet_rate_cfg_text(a->limit, a->burst, ours, sizeof ours);
      lr_fmt(err, errlen,
             "the rate key is shared with other settings (theirs: %s; ours: %s): give this "
             "policy a fleet.key of its own, or reset the fleet",
             text + 18, ours);
      return LR_FLEET_E_REFUSED;
    }
    return lr_script_refused(&f->url, r, "the rate script", LR_RATE_SCRIPT, err, errlen);
  }
  long long *fields[4] = { &o->granted, &o->now_us, &o->b_us, &o->retry_us };
  int ok = r->type == REDIS_REPLY_ARRAY && r->elements == 4;
  for (size_t i = 0; ok && i < 4; i++) {
    ok = r->element && r->element[i] && r->element[i]->type == REDIS_REPLY_INTEGER;
    if (ok) *fields[i] = r->element[i]->integer;
  }
  if (!ok) {
    lr_fmt(err, errlen, "the rate script's reply is not 4 integers (%s)", lr_reply_kind(r));
    return LR_FLEET_E_PROTOCOL;
  }
  const char *why = out_of_range(o, a);
  if (why) {
    lr_fmt(err, errlen, "the rate script's reply is out of range: %s", why);
    return LR_FLEET_E_PROTOCOL;
  }
  return LR_FLEET_OK;
}

static int is_noscript(const redisReply *r) {
  return r->type == REDIS_REPLY_ERROR && r->str && strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/* Queues the script's run: EVALSHA by its SHA (computed here), or EVAL
 * (the server answered NOSCRIPT: EVAL runs it and puts it in the cache). */
static lr_fleet_code append(lr_fleet *f, const rate_ask *a, int eval) {
  char num[5][32], cfg[120];
  lr_fmt(num[0], sizeof num[0], "%.17g", a->limit);
  lr_fmt(num[1], sizeof num[1], "%ld", a->burst);
  lr_fmt(num[2], sizeof num[2], "%ld", a->want);
  lr_fmt(num[3], sizeof num[3], "%lld", a->horizon_us);
  lr_fmt(num[4], sizeof num[4], "%lld", (long long)f->set.ttl_seconds * 1000 + 60000);
  lr_fleet_rate_cfg_text(a->limit, a->burst, cfg, sizeof cfg);
  if (!f->rate_sha[0]) lr_script_sha(LR_RATE_SCRIPT, f->rate_sha);
  eval = eval || !f->rate_sha[0];
  const char *argv[11] = { eval ? "EVAL" : "EVALSHA",
                           eval ? LR_RATE_SCRIPT : f->rate_sha,
                           "1",
                           f->rate_key,
                           num[0],
                           num[1],
                           num[2],
                           num[3],
                           num[4],
                           f->owner, /* cfg_by */
                           cfg };
  return lr_conn_append(&f->conn, 11, argv, NULL);
}

/* One round trip for `want` slots, under io, by `deadline`; on NOSCRIPT
 * (its first use on this server, a restart, a failover) once more, by
 * EVAL. */
static lr_fleet_code run_script(lr_fleet *f, const rate_ask *a, int64_t deadline, rate_reply *o,
                                char *err, size_t errlen) {
  lr_fleet_code rc = LR_FLEET_OK;
  for (int round = 0; round < 2; round++) {
    redisReply *r = NULL;
    rc = append(f, a, round);
    if (rc == LR_FLEET_OK) rc = lr_conn_read(&f->conn, deadline, &r, err, errlen);
    if (rc != LR_FLEET_OK) return rc;
    int again = is_noscript(r) && round == 0;
    if (!again) rc = decode(f, r, a, o, err, errlen);
    freeReplyObject(r);
    if (!again) break;
  }
  return rc;
}

/* With io held: connect if need be, then the script.  A failure
 * degrades the handle (said once). */
static lr_fleet_code lease_locked(lr_fleet *f, const rate_ask *a, rate_reply *o) {
  char err[512] = "";
  int64_t deadline = 0, start = lr_monotonic_ms();
  f->conn.cancel = &f->stopper;
  lr_fleet_code rc = lr_fleet_connect_locked(f, 0, &deadline, err, sizeof err);
  if (rc == LR_FLEET_OK) rc = run_script(f, a, deadline, o, err, sizeof err);
  /* a cluster's MOVED or ASK (redis_cluster.c): again, there */
  for (int redirects = 0; rc != LR_FLEET_OK && lr_cluster_again(&f->conn, &redirects);) {
    lr_conn_close(&f->conn);
    deadline = 0;
    rc = lr_fleet_connect_locked(f, 1, &deadline, err, sizeof err);
    if (rc != LR_FLEET_OK) {
      f->conn.cancel = NULL;
      return rc; /* said and counted by the connect */
    }
    rc = run_script(f, a, deadline, o, err, sizeof err);
  }
  lr_cluster_done(&f->conn);
  f->conn.cancel = NULL;
  if (rc == LR_FLEET_E_BACKOFF) return rc;
  if (rc != LR_FLEET_OK)
    lr_fleet_failed_locked(f, rc, err, start, 0);
  else
    lr_fleet_healthy_locked(f);
  return rc;
}

/* The worker's: the block asked for, leased and added to this process's
 * slots (unless the settings changed meanwhile). */
static void lease_asked(lr_fleet *f, int work) {
  (void)work;
  pthread_mutex_lock(&f->io);
  pthread_mutex_lock(&f->rate_lock);
  rate_ask a = f->rate_ask;
  int asked = f->rate_asked_at != 0;
  pthread_mutex_unlock(&f->rate_lock);
  if (!asked) {
    pthread_mutex_unlock(&f->io);
    return;
  }
  rate_reply o;
  lr_fleet_code rc = lease_locked(f, &a, &o);
  /* the reply's moment, read after it came: slots are never early */
  double got = lr_monotonic_now();
  pthread_mutex_lock(&f->rate_lock);
  f->rate_asked_at = 0;
  if (rc == LR_FLEET_OK && f->rate_limit == a.limit && f->rate_burst == a.burst) {
    double first = got + (double)(o.b_us - o.now_us) / 1e6; /* the fleet's next slot */
    lr_lease_add(&f->lease, (long)o.granted, got, first, 1 / a.limit);
    f->rate_first = o.granted == 0 ? first : 0;
    if (o.granted == 0)
      lr_lease_full(&f->lease, got, (double)o.retry_us / 1e6, a.want, 1 / a.limit);
  }
  pthread_mutex_unlock(&f->rate_lock);
  pthread_mutex_unlock(&f->io);
}

/* Ask again this soon while the worker leases a block. */
#define ASK_AGAIN 0.005

int lr_fleet_rate_reserve(lr_fleet *f, double at, double latest, int64_t limit_ms, double u,
                          double *wait) {
  /* a fork's child: the parent's worker may have held rate_lock */
  if (!f || !atomic_load(&f->rate) || !lr_fleet_owned(f)) return LR_FLEET_LOCAL;
  lr_fleet_tell(f);
  int64_t now_ms = lr_monotonic_ms();
  pthread_mutex_lock(&f->rate_lock);
  int v = lr_lease_take(&f->lease, at, latest, wait);
  /* the fleet's horizon was full at the last ask: not again before a
   * block fits (every waiting call of a batch asks) */
  int full = v == 0 && lr_lease_wait_full(&f->lease, lr_monotonic_now(), at, u, wait);
  int64_t asked_at = f->rate_asked_at;
  /* the fleet had no slot for this call's horizon: the next comes after
   * its deadline */
  int after = v == 0 && latest >= 0 && f->rate_first > latest;
  if (v == 0 && !full && !after && !asked_at) {
    rate_ask a = { lr_lease_want(&f->lease, f->rate_limit), f->rate_burst, f->rate_limit,
                   llround(lr_lease_horizon(lr_monotonic_now(), latest) * 1e6), u };
    f->rate_ask = a;
    f->rate_asked_at = asked_at = now_ms;
  }
  pthread_mutex_unlock(&f->rate_lock);
  if (after) return *wait = -1, 1;
  if (full) return 0;
  if (v != 0) return v > 0 ? 1 : (*wait = -1, 1);
  if (limit_ms > 0 && now_ms >= limit_ms) return LR_FLEET_LOCAL; /* no time to ask */
  lr_fleet_kick(f, LR_WORK_RATE, lease_asked);
  /* Redis known down (the worker reconnects when the backoff allows), or
   * slower than usual: the local limiter, at once */
  if (atomic_load(&f->health) == LR_FLEET_DEGRADED) return LR_FLEET_LOCAL;
  /* a block asked for longer ago than the patience: the local limiter
   * decides meanwhile */
  if (now_ms - asked_at > lr_fleet_patience_ms(f)) {
    char why[80];
    lr_fmt(why, sizeof why, "the rate script's reply is %lld ms late",
           (long long)(now_ms - asked_at));
    lr_fleet_slow(f, why);
    lr_fleet_tell(f);
    return LR_FLEET_LOCAL;
  }
  *wait = ASK_AGAIN * (1 + u);
  return 0;
}
