/* admin.c: what `luaretry fleet POLICY [--reset]` needs: read the
 * fleet's state and its registry of processes, or delete both.  Plain
 * commands, not the update script: looking must not change what is seen
 * (no sync is recorded, no breaker moves to half-open). */
#include <errno.h>
#include <limits.h>
#include <math.h>
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
    rc = lr_script_refused(&f->url, r, "EVAL", NULL, detail, len);
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
    lr_fmt(err, errlen, "%s: %s", f->url.redacted, lr_fleet_strerror(LR_FLEET_E_FORKED));
    return LR_FLEET_E_FORKED;
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
    char text[204], cmd[32];
    size_t shown = 0;
    lr_reply_quote(&f->url, replies[i], text, sizeof text);
    rc = lr_conn_error_code(replies[i]);
    /* the key it was about, when it has one: Redis's words name none; an
     * ACL user's missing command: what looking and resetting need */
    lr_fmt(detail, sizeof detail, "%s%s%s refused: %s%s%s", argvs[i][0], argcs[i] > 1 ? " " : "",
           argcs[i] > 1 ? argvs[i][1] : "", text,
           lr_reply_wrongtype(replies[i]) ? WRONGTYPE_HINT : "",
           lr_acl_refused(replies[i], NULL, cmd, sizeof cmd, &shown)
             ? " (luaretry fleet's ACL user needs " LR_ACL_RUN ", " LR_ACL_ADMIN ")"
             : "");
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

/* A string reply as the scripts' tonumber() reads it (Lua 5.1's: strtod,
 * spaces around allowed, the text up to a NUL): 1 and *v, 0 when it is no
 * number (a script takes its default then), -1 out of memory. */
static int lua_number(const redisReply *r, double *v) {
  if (!r || r->type != REDIS_REPLY_STRING || r->len == 0) return 0;
  char small[64], *buf = r->len < sizeof small ? small : malloc(r->len + 1), *end;
  if (!buf) return -1;
  memcpy(buf, r->str, r->len);
  buf[r->len] = '\0';
  *v = strtod(buf, &end);
  int ok = end != buf;
  while (ok && (*end == ' ' || (*end >= '\t' && *end <= '\r'))) end++;
  ok = ok && *end == '\0';
  if (buf != small) free(buf);
  return ok;
}

/* A Lua number as Redis replies it (script_lua.c: a cast to long long):
 * NaN or out of range is what x86-64's conversion gives, the least. */
static long long redis_integer(double v) {
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) return LLONG_MIN;
  return (long long)v;
}

/* The update script's reply (redis_script.c) to the sync every process
 * makes before its first call (lr_fleet_sync_to_call: nothing counted, a
 * probe permit asked when the policy has a breaker), from the state it
 * reads (tonumber(x) or 0) and what it does with it: an open breaker
 * whose period is over half-opens; a closed one with `failures` in a row
 * opens; a half-open one hands a permit out (renewed once another open
 * period passed with none left); the throttle's buckets within the window
 * are summed.  The budget's tokens and blocks are clamped by the script:
 * they never make a reply out of range. */
enum { ANSWER_FIELDS = 12, A_STATE = 1, A_FAILS, A_OPENED, A_LEFT, A_GRANTED, A_NOW, A_REQ, A_ACC };

/* What the script reads: the hash's fields state, fails, opened_at and
 * probes_left (as A_*), and the throttle window's sums. */
enum { S_STATE, S_FAILS, S_OPENED, S_LEFT, S_REQ, S_ACC, S_COUNT };

typedef struct {
  const redisReply *hm; /* the HMGET of the hash's fields */
  const lr_fleet_limits *l;
  long long now_ms;
  double v[S_COUNT];
} script_input;

static int stored(const redisReply *hm, size_t i, double *v) {
  *v = 0;
  int n = hm->type == REDIS_REPLY_ARRAY && i < hm->elements ? lua_number(hm->element[i], v) : 0;
  if (n == 0) *v = 0;
  return n;
}

static lr_fleet_code script_read(script_input *in, const redisReply *buckets) {
  for (int i = S_STATE; i <= S_LEFT; i++)
    if (stored(in->hm, (size_t)i + 1, &in->v[i]) < 0) return LR_FLEET_E_NOMEM;
  in->v[S_REQ] = in->v[S_ACC] = 0;
  long long width = in->l->bucket_ms, slot = width > 0 ? in->now_ms / width : 0;
  for (size_t j = 0; width > 0 && j < 10; j++) {
    double s, r, c;
    int got = stored(buckets, 3 * j, &s);
    if (got < 0 || stored(buckets, 3 * j + 1, &r) < 0 || stored(buckets, 3 * j + 2, &c) < 0)
      return LR_FLEET_E_NOMEM;
    if (got && s > (double)(slot - 10) && s <= (double)slot) in->v[S_REQ] += r, in->v[S_ACC] += c;
  }
  return LR_FLEET_OK;
}

static void script_answer(const double v[S_COUNT], const lr_fleet_limits *l, long long now_ms,
                          long long a[ANSWER_FIELDS]) {
  double state = v[S_STATE], fails = v[S_FAILS], opened = v[S_OPENED], left = v[S_LEFT];
  double now = (double)now_ms, want = l->breaker ? 1 : 0, granted = 0;
  if (state == 1 && now - opened >= (double)l->open_ms)
    state = 2, opened = now, left = (double)l->probes;
  if (state == 0 && l->failures > 0 && fails >= (double)l->failures) state = 1, opened = now;
  if (want > 0 && state == 2) {
    if (left <= 0 && now - opened >= (double)l->open_ms) opened = now, left = (double)l->probes;
    granted = left < want ? left : want; /* Lua 5.1's math.min(want, left) */
    left = left - granted;
  }
  memset(a, 0, sizeof(long long) * ANSWER_FIELDS);
  a[A_STATE] = redis_integer(state), a[A_FAILS] = redis_integer(fails);
  a[A_OPENED] = redis_integer(opened), a[A_LEFT] = redis_integer(left);
  a[A_GRANTED] = redis_integer(granted), a[A_NOW] = now_ms;
  a[A_REQ] = redis_integer(v[S_REQ]), a[A_ACC] = redis_integer(v[S_ACC]);
}

/* Whether the process takes the reply to v: the very check
 * (lr_redis_script_decode's) it makes of it; why not. */
static int script_takes(const double v[S_COUNT], const lr_fleet_limits *l, long long now_ms,
                        char *why, size_t size) {
  static const lr_redis_url no_url;
  long long a[ANSWER_FIELDS];
  script_answer(v, l, now_ms, a);
  redisReply el[ANSWER_FIELDS], *pel[ANSWER_FIELDS];
  for (int i = 0; i < ANSWER_FIELDS; i++) {
    memset(&el[i], 0, sizeof el[i]);
    el[i].type = REDIS_REPLY_INTEGER, el[i].integer = a[i], pel[i] = &el[i];
  }
  redisReply r;
  memset(&r, 0, sizeof r);
  r.type = REDIS_REPLY_ARRAY, r.elements = ANSWER_FIELDS, r.element = pel;
  lr_fleet_script s = { "", 0 };
  lr_fleet_reply out;
  int noscript = 0;
  why[0] = '\0';
  return lr_redis_script_decode(&s, &no_url, &r, l, l->breaker ? 1 : 0, 0, 0, &out, &noscript, why,
                                size) == LR_FLEET_OK;
}

/* What the value the script read holds, as messages quote it. */
static void quote_field(const script_input *in, int k, char *out, size_t size) {
  if (k == S_REQ || k == S_ACC) {
    lr_fmt(out, size, "%s fields within the throttle's window sum to %.17g",
           k == S_REQ ? "trI" : "taI", in->v[k]);
    return;
  }
  static const char *const NAMES[] = { "state", "fails", "opened_at", "probes_left" };
  const redisReply *x = in->hm->element[k + 1];
  char text[40];
  lr_reply_escape(x->str ? x->str : "", x->len < 32 ? x->len : 32, text, sizeof text, "");
  lr_fmt(out, size, "%s field holds \"%s\"", NAMES[k], text);
}

/* Every value of the fleet's state for which the update script's reply
 * to a process's first sync is refused (so that no process syncs the
 * success that would mend it), named: each that is refused beside a
 * fresh fleet's (0 for the others). */
static lr_fleet_code refused_state(const script_input *in, char *err, size_t errlen) {
  char why[200], other[200];
  if (script_takes(in->v, in->l, in->now_ms, why, sizeof why)) return LR_FLEET_OK;
  size_t used = 0;
  err[0] = '\0';
  for (int k = 0; k < S_COUNT; k++) {
    double alone[S_COUNT] = { 0 };
    alone[k] = in->v[k];
    if (alone[k] == 0 || script_takes(alone, in->l, in->now_ms, other, sizeof other)) continue;
    char what[120];
    quote_field(in, k, what, sizeof what);
    lr_fmt(err + used, errlen - used, "%s%s", used ? " and its " : "the fleet's ", what);
    used = strlen(err);
  }
  if (!used) lr_fmt(err, errlen, "the fleet's state as a whole"), used = strlen(err);
  lr_fmt(err + used, errlen - used,
         ", for which every process's sync is refused (\"%s\"): --reset clears it", why);
  return LR_FLEET_E_PROTOCOL;
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

/* The replies to TIME, HMGET of the hash, ZREVRANGE of the registry and
 * HMGET of the throttle's buckets, read as a process with limits l would
 * see them. */
static lr_fleet_code status_decode(redisReply *r[4], const lr_fleet_limits *l, lr_fleet_status *st,
                                   char *err, size_t errlen) {
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
  /* Shown as 0, a value the script refuses read "closed", or "0 transient
   * failures", while every process was refused: named instead. */
  script_input in = { r[1], l, st->now_ms, { 0 } };
  lr_fleet_code rc = script_read(&in, r[3]);
  if (rc == LR_FLEET_OK) rc = refused_state(&in, err, errlen);
  if (rc != LR_FLEET_OK) return rc;
  read_state(r[1], st);
  if (st->opened_at_ms > st->now_ms) st->opened_at_ms = 0; /* not a time the script writes */
  return read_processes(r[2], st);
}

lr_fleet_code lr_fleet_status_decode(struct redisReply *r[3], lr_fleet_status *st, char *err,
                                     size_t errlen) {
  /* no policy's limits: no open period, no breaker's count, no throttle */
  static const lr_fleet_limits none;
  redisReply no_buckets;
  memset(&no_buckets, 0, sizeof no_buckets);
  no_buckets.type = REDIS_REPLY_NIL;
  redisReply *four[4] = { r[0], r[1], r[2], &no_buckets };
  return status_decode(four, &none, st, err, errlen);
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

/* The rate limiter's theoretical arrival time, tat (µs, Redis's clock),
 * as its script reads it (redis_rate.c: tonumber(tat) or 0, never before
 * now): slots are leased up to it.  An ask that gets no slot is answered
 * with the wait from its horizon (LR_LEASE_HORIZON, less for a call
 * whose deadline is nearer) to the next slot, which every process
 * refuses beyond lr_rate_wait_max_us (the rate script's reply is out of
 * range past it).  No script writes a
 * next slot that far ahead; from there on the asks of calls near their
 * deadline are refused, and from LR_LEASE_HORIZON further every ask. */
static lr_fleet_code read_rate(const redisReply *b, double limit, long burst, lr_fleet_status *st,
                               char *err, size_t errlen) {
  double tat = 0, now = (double)st->now_ms * 1000, interval = 1e6 / limit;
  const redisReply *t = b->type == REDIS_REPLY_ARRAY && b->elements > 0 ? b->element[0] : NULL;
  int n = lua_number(t, &tat);
  if (n < 0) return LR_FLEET_E_NOMEM;
  if (n == 0) tat = 0;
  double base = now > tat ? now : tat; /* Lua 5.1's math.max(tat, now): NaN stays */
  double ahead = base - (double)(burst - 1) * interval - now;
  double over = ahead - lr_rate_wait_max_us(interval); /* µs */
  if (!(over <= 0)) {
    char text[40], when[64] = "not a time", whose[96] = "every process's ask for a slot is refused";
    lr_reply_escape(t->str, t->len < 32 ? t->len : 32, text, sizeof text, "");
    if (ahead < HUGE_VAL) lr_fmt(when, sizeof when, "a next slot %.0f s ahead", ahead / 1e6);
    if (over < LR_LEASE_HORIZON * 1e6)
      lr_fmt(whose, sizeof whose,
             "a call's ask for a slot is refused within %.1f s of its deadline", over / 1e6);
    lr_fmt(err, errlen,
           "the fleet's rate key's tat field holds \"%s\" (%s), for which %s (\"the rate "
           "script's reply is out of range: a wait for a slot out of range\"): --reset clears it",
           text, when, whose);
    return LR_FLEET_E_PROTOCOL;
  }
  st->rate_ahead = tat > now ? (tat - now) / 1e6 : 0;
  return LR_FLEET_OK;
}

/* The guard numbers as a sync sends them (sync.c): what the update
 * script's reply is checked against. */
static void limits_of(lr_fleet *f, lr_fleet_limits *l) {
  memset(l, 0, sizeof *l);
  l->max_milli = atomic_load(&f->max_milli);
  l->breaker = atomic_load(&f->breaker);
  l->failures = atomic_load(&f->breaker) ? atomic_load(&f->failures) : 0;
  l->open_ms = atomic_load(&f->open_ms);
  l->probes = atomic_load(&f->probes);
  l->bucket_ms = atomic_load(&f->throttle) ? atomic_load(&f->bucket_ms) : 0;
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
  /* the blocks' hash, which every sync reads: of another type, every
   * sync is refused (WRONGTYPE), so it is named as the others are */
  const char *blocks[] = { "HLEN", f->leases_key };
  /* the expiries' entry "": without it (or the hash) the blocks' record
   * is lost, and the next sync takes them back (redis_script.c) */
  const char *kept[] = { "ZCOUNT", f->lexp_key, "inf", "inf" };
  int argcs[8] = { 1, 10, 5, 32, 3, 4, 2, 4 };
  const char **argvs[8] = { time_cmd, hmget, zrange, buckets, tat, holders, blocks, kept };
  redisReply *r[8] = { NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL };
  if (!lr_fleet_owned(f)) return pipeline(f, 0, NULL, NULL, NULL, err, errlen); /* says why */
  lr_fleet_limits l;
  limits_of(f, &l);
  pthread_mutex_lock(&f->io);
  lr_fleet_code rc = pipeline(f, 8, argcs, argvs, r, err, errlen);
  pthread_mutex_unlock(&f->io);
  char why[600] = "";
  int came = rc == LR_FLEET_OK; /* the replies came: a refusal below is theirs */
  if (came) rc = status_decode(r, &l, st, why, sizeof why);
  if (rc == LR_FLEET_OK && r[5]->type == REDIS_REPLY_INTEGER && r[5]->integer > 0 &&
      r[5]->integer <= INT_MAX)
    st->lease_holders = (long)r[5]->integer;
  /* shown as the next sync will find it: a lost record's blocks are back
   * among the tokens (which count them already) */
  if (rc == LR_FLEET_OK && (r[6]->type != REDIS_REPLY_INTEGER || r[6]->integer == 0 ||
                            r[7]->type != REDIS_REPLY_INTEGER || r[7]->integer == 0))
    st->leased = 0, st->lease_holders = 0;
  if (rc == LR_FLEET_OK && l.bucket_ms > 0) {
    st->throttle = 1;
    st->window_seconds = (double)l.bucket_ms * 10 / 1000;
    read_window(r[3], l.bucket_ms, st);
  }
  if (rc == LR_FLEET_OK && atomic_load(&f->rate)) {
    st->rate = 1;
    pthread_mutex_lock(&f->rate_lock);
    st->rate_limit = f->rate_limit;
    long burst = f->rate_burst;
    pthread_mutex_unlock(&f->rate_lock);
    if (st->rate_limit > 0) rc = read_rate(r[4], st->rate_limit, burst, st, why, sizeof why);
  }
  if (came && rc != LR_FLEET_OK) /* which Redis */
    lr_fmt(err, errlen, "%s: %s", f->url.redacted, why[0] ? why : lr_fleet_strerror(rc));
  for (int i = 0; i < 8; i++)
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
