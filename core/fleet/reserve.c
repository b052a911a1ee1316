/* reserve.c: the retry budget's floor, the fleet's (budget.reserve): one
 * reserve of retries per second for every process that shares the key, so
 * that 100 processes with one call each in an outage add what one process
 * would, not a hundred times it.  Its state is one field of the budget's
 * hash (rtat: when the reserve was last empty, Redis's ms), changed by a
 * script of its own on Redis's clock with lr_reserve_gcra's arithmetic.
 * Asked only for a retry the fleet's tokens refuse, after its wait: the
 * sync the call makes then carries the question (redis_script.c: the same
 * arithmetic on the same field, no round trip of its own); this script
 * is asked only when no sync asked it (the sync failed, or the retry was
 * decided while Redis was away and it came back during the wait) or when
 * the sync saw the fleet's tokens allow a retry that this process's view
 * then refused (one bounded round trip); Redis down, slow or busy with
 * another thread of this process: the local reserve decides. */
#include <math.h>
#include <string.h>

#include <hiredis.h>

#include "fleet_internal.h"

/*   KEYS[1]  the budget's hash (redis_script.c)
 *   ARGV     interval_ms (1000 / reserve) span_ms (LR_RESERVE_SPAN)
 *   returns  1: a retry of the reserve taken; 0: none left */
static const char RESERVE_SCRIPT[] =
  "local t = redis.call('TIME')\n"
  "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
  "local interval, span = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
  "local tat = tonumber(redis.call('HGET', KEYS[1], 'rtat')) or 0\n"
  "if tat < now - span then tat = now - span end\n"
  "if now - tat < interval then return 0 end\n"
  "redis.call('HSET', KEYS[1], 'rtat', string.format('%.17g', tat + interval))\n"
  "return 1\n";

static int is_noscript(const redisReply *r) {
  return r->type == REDIS_REPLY_ERROR && r->str && strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/* Queues the script: EVALSHA by its SHA (computed here), or EVAL (the
 * server answered NOSCRIPT: EVAL runs it and puts it in the cache). */
static lr_fleet_code append(lr_fleet *f, const char *interval, const char *span, int eval) {
  if (!f->reserve_sha[0]) lr_script_sha(RESERVE_SCRIPT, f->reserve_sha);
  eval = eval || !f->reserve_sha[0];
  const char *argv[6] = {
    eval ? "EVAL" : "EVALSHA", eval ? RESERVE_SCRIPT : f->reserve_sha, "1", f->key, interval, span
  };
  return lr_conn_append(&f->conn, 6, argv, NULL);
}

/* One round trip, by `deadline`: the script's reply in *out (the
 * caller's to free); on NOSCRIPT (its first use on this server, a
 * restart, a failover, another cluster node) once more, by EVAL. */
static lr_fleet_code run_script(lr_fleet *f, const char *interval, const char *span,
                                int64_t deadline, redisReply **out, char *err, size_t errlen) {
  *out = NULL;
  for (int round = 0; round < 2; round++) {
    redisReply *r = NULL;
    lr_fleet_code rc = append(f, interval, span, round);
    if (rc == LR_FLEET_OK) rc = lr_conn_read(&f->conn, deadline, &r, err, errlen);
    if (rc != LR_FLEET_OK) return rc;
    if (!is_noscript(r) || round > 0) {
      *out = r;
      return LR_FLEET_OK;
    }
    freeReplyObject(r);
  }
  return LR_FLEET_OK; /* not reached */
}

/* The script's reply as a grant: OK and *granted, or why not in err. */
static lr_fleet_code granted_of(lr_fleet *f, const redisReply *r, long long *granted, char *err,
                                size_t errlen) {
  if (r->type == REDIS_REPLY_INTEGER && r->integer >= 0 && r->integer <= 1) {
    *granted = r->integer;
    return LR_FLEET_OK;
  }
  if (r->type == REDIS_REPLY_ERROR)
    return lr_script_refused(&f->url, r, "the reserve script", RESERVE_SCRIPT, err, errlen);
  lr_fmt(err, errlen, "the reserve script's reply is not 0 or 1 (%s)", lr_reply_kind(r));
  return LR_FLEET_E_PROTOCOL;
}

/* The script's ARGV: interval_ms, span_ms. */
static double interval_ms(double reserve) { return 1000 / reserve; }
static double span_ms(void) { return LR_RESERVE_SPAN * 1000; }

int lr_fleet_reserve_ask(lr_fleet *f, lr_fleet_batch *b) {
  double reserve = (double)atomic_load(&f->reserve_milli) / 1000;
  b->rinterval_ms = b->rspan_ms = 0;
  if (!atomic_load(&f->budget) || !(reserve > 0)) return 0;
  b->rinterval_ms = interval_ms(reserve);
  b->rspan_ms = span_ms();
  return 1;
}

static lr_fleet_code ask_locked(lr_fleet *f, double reserve, int64_t limit_ms, lr_waiter *w,
                                long long *granted) {
  char err[512] = "", num[2][32];
  int64_t deadline = limit_ms, start = lr_monotonic_ms();
  f->conn.cancel = w;
  lr_fleet_code rc = lr_fleet_connect_locked(f, 0, &deadline, err, sizeof err);
  lr_fmt(num[0], sizeof num[0], "%.17g", interval_ms(reserve));
  lr_fmt(num[1], sizeof num[1], "%.17g", span_ms());
  redisReply *r = NULL;
  if (rc == LR_FLEET_OK) rc = run_script(f, num[0], num[1], deadline, &r, err, sizeof err);
  if (rc == LR_FLEET_OK) rc = granted_of(f, r, granted, err, sizeof err);
  /* a cluster's MOVED or ASK (redis_cluster.c): nothing was taken; again,
   * there, as sync.c does */
  for (int redirects = 0; rc != LR_FLEET_OK && lr_cluster_again(&f->conn, &redirects);) {
    if (r) freeReplyObject(r), r = NULL;
    lr_conn_close(&f->conn);
    deadline = limit_ms;
    rc = lr_fleet_connect_locked(f, 1, &deadline, err, sizeof err);
    if (rc != LR_FLEET_OK) {
      lr_cluster_done(&f->conn);
      f->conn.cancel = NULL;
      return rc; /* said and counted by the connect */
    }
    rc = run_script(f, num[0], num[1], deadline, &r, err, sizeof err);
    if (rc == LR_FLEET_OK) rc = granted_of(f, r, granted, err, sizeof err);
  }
  lr_cluster_done(&f->conn);
  if (r) freeReplyObject(r);
  f->conn.cancel = NULL;
  if (rc != LR_FLEET_OK)
    lr_fleet_failed_locked(f, rc, err, start, limit_ms);
  else
    lr_fleet_healthy_locked(f);
  return rc;
}

int lr_fleet_reserve_take(lr_fleet *f, int64_t limit_ms, lr_waiter *w) {
  if (!f || !atomic_load(&f->budget) || atomic_load(&f->health) != LR_FLEET_HEALTHY ||
      !lr_fleet_owned(f))
    return LR_FLEET_LOCAL;
  double reserve = (double)atomic_load(&f->reserve_milli) / 1000;
  if (!(reserve > 0)) return LR_FLEET_LOCAL;
  if (limit_ms > 0 && lr_monotonic_ms() >= limit_ms) return LR_FLEET_LOCAL; /* no time to ask */
  if (pthread_mutex_trylock(&f->io) != 0) return LR_FLEET_LOCAL;
  long long granted = 0;
  lr_fleet_code rc = ask_locked(f, reserve, limit_ms, w, &granted);
  pthread_mutex_unlock(&f->io);
  return rc == LR_FLEET_OK ? (int)granted : LR_FLEET_LOCAL;
}
