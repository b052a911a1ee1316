/* admin.c: what `luaretry fleet POLICY [--reset]` needs: read the
 * fleet's state and its registry of processes, or delete both.  Plain
 * commands, not the update script: looking must not change what is seen
 * (no sync is recorded, no breaker moves to half-open). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis.h>

#include "fleet_internal.h"

#define MINUTE_MS              60000
#define LR_FLEET_PROCESSES_MAX 1000

/* First, on its own (the commands may delete): what is shown or reset is
 * only worth it if the server runs scripts for this user, as a process
 * learns from its first sync's reply.  EVAL of a script with no key, the
 * least the fleet needs (its EVALSHA falls back to EVAL): SCRIPT LOAD
 * would also ask for a command an ACL user of the fleet may lack. */
static lr_fleet_code scripts_run(lr_fleet *f, int64_t deadline, char *detail, size_t len) {
  const char *argv[3] = { "EVAL", "return 1", "0" };
  redisReply *r = NULL;
  lr_fleet_code rc = lr_conn_append(&f->conn, 3, argv, NULL);
  if (rc == LR_FLEET_OK) rc = lr_conn_read(&f->conn, deadline, &r, detail, len);
  if (rc != LR_FLEET_OK) return rc;
  if (r->type == REDIS_REPLY_ERROR)
    rc = lr_script_refused(&f->url, r, "EVAL", detail, len);
  else if (r->type != REDIS_REPLY_INTEGER || r->integer != 1) {
    lr_fmt(detail, len, "EVAL of \"return 1\" answered %s, not 1", lr_reply_kind(r));
    rc = LR_FLEET_E_PROTOCOL;
  }
  freeReplyObject(r);
  return rc;
}

/* Runs argc commands pipelined in one round trip with the io lock held,
 * after scripts_run's; replies[i] for each, freed by the caller.
 * Connects at once if needed. */
static lr_fleet_code pipeline(lr_fleet *f, int n, int argcs[], const char **argvs[],
                              redisReply *replies[], char *err, size_t errlen) {
  char detail[640] = "";
  if (!lr_fleet_owned(f)) { /* a fork's child: the connection is the parent's */
    lr_fmt(err, errlen, "%s: a fork's child shares no fleet: load the policy again",
           f->url.redacted);
    return LR_FLEET_E_REFUSED;
  }
  int64_t deadline = 0;
  lr_fleet_code rc = lr_fleet_connect_locked(f, 1, &deadline, detail, sizeof detail);
  if (rc == LR_FLEET_OK) rc = scripts_run(f, deadline, detail, sizeof detail);
  for (int redirects = 0;;) {
    for (int i = 0; rc == LR_FLEET_OK && i < n; i++)
      rc = lr_conn_append(&f->conn, argcs[i], argvs[i], NULL);
    for (int i = 0; rc == LR_FLEET_OK && i < n; i++)
      rc = lr_conn_read(&f->conn, deadline, &replies[i], detail, sizeof detail);
    /* a cluster's MOVED or ASK (redis_cluster.c): again, there */
    if (rc != LR_FLEET_OK || !lr_cluster_again(&f->conn, &redirects)) break;
    for (int i = 0; i < n; i++) freeReplyObject(replies[i]), replies[i] = NULL;
    lr_conn_close(&f->conn);
    deadline = 0;
    rc = lr_fleet_connect_locked(f, 1, &deadline, detail, sizeof detail);
  }
  lr_cluster_done(&f->conn);
  for (int i = 0; rc == LR_FLEET_OK && i < n; i++) {
    if (replies[i]->type != REDIS_REPLY_ERROR) continue;
    char text[204];
    lr_reply_quote(&f->url, replies[i], text, sizeof text);
    rc = lr_conn_error_code(replies[i]);
    /* the key it was about, when it has one: Redis's words name none */
    lr_fmt(detail, sizeof detail, "%s%s%s refused: %s%s", argvs[i][0], argcs[i] > 1 ? " " : "",
           argcs[i] > 1 ? argvs[i][1] : "", text,
           lr_reply_wrongtype(replies[i]) ? WRONGTYPE_HINT : "");
  }
  if (rc != LR_FLEET_OK) {
    lr_redis_url_scrub(&f->url, detail);
    if (rc != LR_FLEET_E_REFUSED && rc != LR_FLEET_E_NOMEM && f->conn.fd >= 0)
      lr_fleet_fail_locked(f, rc, detail);
    lr_fmt(err, errlen, "%s: %s", f->url.redacted, detail);
  }
  lr_fleet_tell(f);
  return rc;
}

/* A decimal integer within [lo, hi], all of s: 1, or 0 (*v untouched). */
static int number_in(const char *s, size_t len, long long lo, long long hi, long long *v) {
  char buf[32];
  if (!s || len == 0 || len >= sizeof buf) return 0;
  memcpy(buf, s, len);
  buf[len] = '\0';
  char *end;
  errno = 0;
  long long n = strtoll(buf, &end, 10);
  if (errno || *end || n < lo || n > hi) return 0;
  *v = n;
  return 1;
}

/* The hash's fields as the script writes them; anything else is shown as
 * 0 (a field absent, or not a number the script could have written). */
static long long field(const redisReply *hm, size_t i, long long hi, int *present) {
  long long v = 0;
  if (i >= hm->elements || hm->element[i]->type != REDIS_REPLY_STRING) return 0;
  *present = 1;
  return number_in(hm->element[i]->str, hm->element[i]->len, 0, hi, &v) ? v : 0;
}

#define MS_MAX 7258118400000LL /* 2200, in Unix ms */

/* A string reply as the update script's tonumber() reads it: 1 and *v, or
 * 0 (no number: the script takes it for 0). */
static int lua_number(const redisReply *r, double *v) {
  char buf[64], *end;
  if (r->type != REDIS_REPLY_STRING || r->len == 0 || (size_t)r->len >= sizeof buf) return 0;
  memcpy(buf, r->str, r->len);
  buf[r->len] = '\0';
  *v = strtod(buf, &end);
  if (end == buf) return 0;
  while (*end == ' ' || (*end >= '\t' && *end <= '\r')) end++;
  return *end == '\0';
}

static void read_state(const redisReply *hm, lr_fleet_status *st) {
  int present = 0;
  st->tokens = (double)field(hm, 0, LLONG_MAX / 2, &present) / 1000;
  st->breaker = (int)field(hm, 1, 2, &present);
  st->consecutive_failures = (int)field(hm, 2, INT_MAX, &present);
  st->opened_at_ms = field(hm, 3, MS_MAX, &present);
  st->probes_left = (int)field(hm, 4, INT_MAX, &present);
  st->max_tokens = (double)field(hm, 5, LLONG_MAX / 2, &present) / 1000;
  st->updated_at_ms = field(hm, 6, MS_MAX, &present);
  /* tokens out in leases are the fleet's still: counted in its tokens */
  st->leased = (double)field(hm, 7, LLONG_MAX / 2, &present) / 1000;
  st->tokens += st->leased;
  st->exists = present;
}

/* ZREVRANGE ... WITHSCORES: member, score, member, score...  Members are
 * shown with control bytes escaped: any process may write one. */
static lr_fleet_code read_processes(const redisReply *z, lr_fleet_status *st) {
  size_t pairs = z->type == REDIS_REPLY_ARRAY ? z->elements / 2 : 0;
  st->processes = pairs ? calloc(pairs, sizeof *st->processes) : NULL;
  if (pairs && !st->processes) return LR_FLEET_E_NOMEM;
  for (size_t i = 0; i < pairs; i++) {
    const redisReply *m = z->element[2 * i], *s = z->element[2 * i + 1];
    long long seen = 0;
    if (m->type != REDIS_REPLY_STRING || s->type != REDIS_REPLY_STRING ||
        !number_in(s->str, s->len, 0, MS_MAX, &seen) || seen > st->now_ms ||
        st->now_ms - seen > MINUTE_MS)
      continue;
    lr_fleet_process *p = &st->processes[st->count++];
    lr_reply_escape(m->str, m->len, p->member, sizeof p->member, "");
    p->seen_ago = (double)(st->now_ms - seen) / 1000;
  }
  return LR_FLEET_OK;
}

lr_fleet_code lr_fleet_status_decode(struct redisReply *r[3], lr_fleet_status *st, char *err,
                                     size_t errlen) {
  const redisReply *t = r[0];
  if (t->type != REDIS_REPLY_ARRAY || t->elements != 2 ||
      t->element[0]->type != REDIS_REPLY_STRING || t->element[1]->type != REDIS_REPLY_STRING ||
      r[1]->type != REDIS_REPLY_ARRAY || r[1]->elements != 8 || r[2]->type != REDIS_REPLY_ARRAY) {
    lr_fmt(err, errlen, "unexpected replies to TIME, HMGET and ZREVRANGE");
    return LR_FLEET_E_PROTOCOL;
  }
  long long sec = 0, usec = 0;
  if (!number_in(t->element[0]->str, t->element[0]->len, 0, MS_MAX / 1000, &sec) ||
      !number_in(t->element[1]->str, t->element[1]->len, 0, 999999, &usec)) {
    lr_fmt(err, errlen, "TIME: not a time of day");
    return LR_FLEET_E_PROTOCOL;
  }
  st->now_ms = sec * 1000 + usec / 1000;
  /* Fields the update script reads as numbers (tonumber: strtod's, spaces
   * around allowed) and whose values make every process's sync refused
   * (redis_script.c): shown as 0 they read "closed", or "open" with no
   * time, while every process is refused.  Not numbers: 0 to the script too. */
  const redisReply *state = r[1]->element[1], *opened = r[1]->element[3];
  double v;
  const char *bad = NULL;
  if (lua_number(state, &v) && v != 0 && v != 1 && v != 2)
    bad = "no breaker state (0, 1 or 2)";
  else if (lua_number(opened, &v) && !(v <= (double)st->now_ms))
    bad = "a time after Redis's clock";
  if (bad) {
    const redisReply *x = lua_number(state, &v) && v != 0 && v != 1 && v != 2 ? state : opened;
    char text[40];
    lr_reply_escape(x->str, x->len < 32 ? x->len : 32, text, sizeof text, "");
    lr_fmt(err, errlen,
           "the fleet's %s field holds \"%s\", %s, for which every sync is refused: "
           "--reset clears it",
           x == state ? "state" : "opened_at", text, bad);
    return LR_FLEET_E_PROTOCOL;
  }
  read_state(r[1], st);
  if (st->opened_at_ms > st->now_ms) st->opened_at_ms = 0; /* not a time the script writes */
  return read_processes(r[2], st);
}

/* The throttle's ten buckets (tsI, trI, taI: HMGET in that order) within
 * the window that ends now, as the script sums them. */
static void read_window(const redisReply *b, long long bucket_ms, lr_fleet_status *st) {
  long long slot = st->now_ms / bucket_ms;
  int present = 0;
  for (size_t j = 0; b->type == REDIS_REPLY_ARRAY && j + 2 < b->elements && j < 30; j += 3) {
    long long s = field(b, j, LLONG_MAX / 2, &present);
    if (!present || s <= slot - 10 || s > slot) continue;
    st->window_requests += (double)field(b, j + 1, LLONG_MAX / 2, &present);
    st->window_accepts += (double)field(b, j + 2, LLONG_MAX / 2, &present);
  }
}

/* The rate limiter's theoretical arrival time (µs, Redis's clock): slots
 * are leased up to it. */
static void read_rate(const redisReply *b, lr_fleet_status *st) {
  /* the script writes it as %.17g, with a fraction when a slot's interval
   * is no whole number of µs: read as a whole number, it was shown as 0 */
  double tat = 0;
  const redisReply *t = b->type == REDIS_REPLY_ARRAY && b->elements > 0 ? b->element[0] : NULL;
  if (t && t->type == REDIS_REPLY_STRING && t->len > 0 && t->len < 32) {
    char buf[32], *end;
    memcpy(buf, t->str, t->len);
    buf[t->len] = '\0';
    double v = strtod(buf, &end);
    if (*end == '\0' && v >= 0 && v <= (double)MS_MAX * 1000) tat = v;
  }
  double ahead = tat / 1e6 - (double)st->now_ms / 1000;
  st->rate_ahead = ahead > 0 ? ahead : 0;
}

lr_fleet_code lr_fleet_status_get(lr_fleet *f, lr_fleet_status *st, char *err, size_t errlen) {
  if (!st) return LR_FLEET_E_ARG;
  memset(st, 0, sizeof *st);
  if (!f) return LR_FLEET_E_ARG;
  const char *time_cmd[] = { "TIME" };
  const char *hmget[] = { "HMGET",     f->key,        "tokens", "state",      "fails",
                          "opened_at", "probes_left", "max",    "updated_at", "leased" };
  /* the newest LR_FLEET_PROCESSES_MAX: a reply of bounded size */
  char last[16];
  lr_fmt(last, sizeof last, "%d", LR_FLEET_PROCESSES_MAX - 1);
  const char *zrange[] = { "ZREVRANGE", f->procs_key, "0", last, "WITHSCORES" };
  /* the throttle's buckets and the rate limiter's arrival time */
  char names[30][8];
  const char *buckets[32] = { "HMGET", f->key };
  for (int i = 0; i < 10; i++)
    for (int k = 0; k < 3; k++) {
      lr_fmt(names[3 * i + k], sizeof names[0], "%s%d", k == 0 ? "ts" : k == 1 ? "tr" : "ta", i);
      buckets[2 + 3 * i + k] = names[3 * i + k];
    }
  const char *tat[] = { "HMGET", f->rate_key, "tat" };
  /* the budget's leases: an entry a member, whose expiry is negated when
   * its block is empty (redis_script.c); "" at +inf keeps the set in being */
  const char *holders[] = { "ZCOUNT", f->lexp_key, "(0", "(inf" };
  int argcs[6] = { 1, 10, 5, 32, 3, 4 };
  const char **argvs[6] = { time_cmd, hmget, zrange, buckets, tat, holders };
  redisReply *r[6] = { NULL, NULL, NULL, NULL, NULL, NULL };
  if (!lr_fleet_owned(f)) return pipeline(f, 0, NULL, NULL, NULL, err, errlen); /* says why */
  pthread_mutex_lock(&f->io);
  lr_fleet_code rc = pipeline(f, 6, argcs, argvs, r, err, errlen);
  pthread_mutex_unlock(&f->io);
  if (rc == LR_FLEET_OK) {
    char why[200];
    rc = lr_fleet_status_decode(r, st, why, sizeof why);
    if (rc != LR_FLEET_OK) lr_fmt(err, errlen, "%s: %s", f->url.redacted, why); /* which Redis */
  }
  if (rc == LR_FLEET_OK && r[5]->type == REDIS_REPLY_INTEGER && r[5]->integer > 0 &&
      r[5]->integer <= INT_MAX)
    st->lease_holders = (long)r[5]->integer;
  long long bucket_ms = atomic_load(&f->throttle) ? atomic_load(&f->bucket_ms) : 0;
  if (rc == LR_FLEET_OK && bucket_ms > 0) {
    st->throttle = 1;
    st->window_seconds = (double)bucket_ms * 10 / 1000;
    read_window(r[3], bucket_ms, st);
  }
  if (rc == LR_FLEET_OK && atomic_load(&f->rate)) {
    st->rate = 1;
    pthread_mutex_lock(&f->rate_lock);
    st->rate_limit = f->rate_limit;
    pthread_mutex_unlock(&f->rate_lock);
    read_rate(r[4], st);
  }
  for (int i = 0; i < 6; i++)
    if (r[i]) freeReplyObject(r[i]);
  if (rc != LR_FLEET_OK) lr_fleet_status_free(st);
  return rc;
}

void lr_fleet_status_free(lr_fleet_status *st) {
  if (!st) return;
  free(st->processes);
  st->processes = NULL;
  st->count = 0;
}

lr_fleet_code lr_fleet_reset(lr_fleet *f, char *err, size_t errlen) {
  if (!f) return LR_FLEET_E_ARG;
  const char *del[] = { "DEL", f->key, f->procs_key, f->rate_key, f->leases_key, f->lexp_key };
  int argc = 6;
  const char **argv = del;
  redisReply *r = NULL;
  if (!lr_fleet_owned(f)) return pipeline(f, 0, NULL, NULL, NULL, err, errlen); /* says why */
  pthread_mutex_lock(&f->io);
  lr_fleet_code rc = pipeline(f, 1, &argc, &argv, &r, err, errlen);
  pthread_mutex_unlock(&f->io);
  if (r) freeReplyObject(r);
  return rc;
}
