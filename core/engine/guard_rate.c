/* guard_rate.c: the rate limiter and header pacing (rate = { limit,
 * burst, adaptive, headers }) as a guard of the chain, last in its order.
 * A first attempt and a retry take a token for when they would start
 * (waiting for it when it comes later: the extra wait is the decision's),
 * then, with rate.headers, a slot under the server's RateLimit quota
 * (quota.c) when the token comes.  A hedge goes now or not at all: it
 * takes a token and a slot only when both are free now (none now: no
 * hedge, not a wait), the token handed back when the quota has no slot.
 * A workflow's request: its token at luaretry_call_next, as a first
 * attempt's (nothing when its call begins).  The outcome:
 * the adaptive rate follows throttling answers and successes, and the
 * server's RateLimit fields set the quota.  The fleet's rate limiter is
 * asked first for a fixed rate (an adaptive one stays the process's). */
#include "call_internal.h"

/* The fleet's rate limiter (a fixed rate; an adaptive one stays the
 * process's): 1 with *extra as lr_call_rate_token returns it, 0 when the
 * local limiter decides.  A later attempt (a retry decided now) asks when
 * its time comes, at luaretry_call_next: a slot leased now would be spent
 * by nobody meanwhile. */
static int remote_rate(luaretry_call *c, double start, double *extra) {
  const lr_rules *r = c->rules;
  if (!c->remote || !c->remote->ops->rate_reserve || r->guards.rate_adaptive) return 0;
  double now = lr_clock_now(&c->clock), at = c->start + start;
  c->rate_remote = 1;
  if (at > now + 0.001) {
    c->admitted = c->attempts; /* not held: ask again then */
    c->admit_at = start;
    return *extra = 0, 1;
  }
  double latest = c->deadline > 0 ? c->start + lr_latest_start(c) : -1;
  double left = c->deadline > 0 ? latest - now : 0;
  if (c->deadline > 0 && left <= 0) left = 1e-9; /* no time: no round trip */
  double wait = 0;
  int v = c->remote->ops->rate_reserve(c->remote->ud, now, at, latest, left, lr_rng_unit(&c->rng),
                                       &c->waiter, &wait);
  if (latest >= 0 && lr_clock_now(&c->clock) >= latest) { /* the round trip took the rest */
    c->rate_remote = 2;
    return *extra = -1, 1;
  }
  if (v == LR_REMOTE_LOCAL) return c->rate_remote = 0;
  if ((v == 1 && wait < 0) || (latest >= 0 && at + wait > latest)) return *extra = -1, 1;
  c->admitted = v == 1 ? c->attempts + 1 : c->attempts;
  c->admit_at = start + wait;
  if (c->deadline > 0) { /* what is left once the token comes */
    double t = lr_call_timeout_at(c, c->admit_at);
    if (t < c->next_timeout) c->next_timeout = t;
  }
  return *extra = wait, 1;
}

/* The pace the rate reads: the call's own under LR_CALL_LAZY_PACE once
 * made; else (and before it is made: an unlimited rate, as a fresh pace's
 * is) the shared one's. */
static lr_shared *pace(const luaretry_call *c) {
  return c->lazy_pace && c->cold && c->cold->own ? c->cold->own : c->shared;
}

/* LR_CALL_LAZY_PACE: the call's own pace, made now if it is not yet, its
 * kept sends counted in it as they went. */
static lr_shared *pace_made(luaretry_call *c) {
  if (!c->lazy_pace || (c->cold && c->cold->own)) return pace(c);
  lr_call_cold *cold = lr_call_cold_get(c); /* the own pace is kept there */
  lr_shared *s = cold ? lr_aligned_calloc(sizeof *s) : NULL;
  if (!s) return c->shared; /* out of memory: the one it shares */
  lr_shared_init(s, &c->rules->guards);
  int held;
  const double *sent = c->remote->lazy_sent; /* lr_call_new: a lazy pace has them */
  for (int k = 0; k < c->lazy_sends; k++)
    lr_rate_reserve(s, &c->rules->guards, sent[k], sent[k], -1, 0, &held);
  c->lazy_sends = 0;
  return cold->own = s;
}

/* lr_rate_reserve on the call's pace.  Before a lazy pace is made the rate
 * is unlimited and a send only counts (the first decrease starts from the
 * sends of the last second when nothing succeeded): it is kept instead,
 * those over 1.2 s older than it dropped (out of any second a decrease
 * looks at); a send out of order, or one more than LR_LAZY_SENDS keeps,
 * makes the pace. */
static double rate_reserve(luaretry_call *c, double now, double at, double latest, double u,
                           int *held) {
  if (c->lazy_pace && c->rules->guards.rate && !(c->cold && c->cold->own)) {
    double *sent = c->remote->lazy_sent; /* the simulated process's, not the call's */
    int n = c->lazy_sends;
    if (n == LR_LAZY_SENDS && at - sent[0] >= 1.2) {
      memmove(sent, sent + 1, sizeof sent[0] * (size_t)(n - 1));
      n--;
    }
    if (n < LR_LAZY_SENDS && (n == 0 || at >= sent[n - 1])) {
      sent[n] = at;
      c->lazy_sends = (unsigned char)(n + 1);
      *held = 1;
      return 0;
    }
    c->lazy_sends = (unsigned char)n;
  }
  return lr_rate_reserve(pace_made(c), &c->rules->guards, now, at, latest, u, held);
}

/* A token for the attempt that would start `start` seconds into the call
 * (the fleet's limiter, else this process's), then, when the policy reads
 * the server's RateLimit fields, a slot under its quota (quota.c), asked
 * when the token comes: a quota read meanwhile counts.  The extra wait, or
 * -1 when it would come past the deadline (nothing reserved then).  Either
 * may hand out a time to ask again instead (admitted stays, and
 * luaretry_call_next asks then): adaptive, past the server's window, for a
 * later attempt (a retry after its backoff) whose token is free when it
 * comes, and for the quota of an attempt whose token comes later. */
/* Whether the rate limiter is an adaptive one whose token may be
 * unlimited (not the headers', not a fixed limit's, not a lazy pace's):
 * worked out once per call, not on every retry. */
void lr_call_rate_prepare(luaretry_call *c) {
  const lr_guards *g = &c->rules->guards;
  c->rate_free =
    g->rate && g->rate_adaptive && !g->rate_headers && !(g->rate_limit > 0) && !c->lazy_pace;
}

double lr_call_rate_token(luaretry_call *c, double start) {
  const lr_rules *r = c->rules;
  if (lr_rate_free_token(c, start)) return 0;
  double base = c->guard_origin + c->start;
  double latest = c->deadline > 0 ? base + lr_latest_start(c) : -1;
  double now = base + (lr_clock_now(&c->clock) - c->start);
  int held = 1;
  double extra = 0;
  c->quota_refused = 0;
  if (!c->token_held) {
    if (remote_rate(c, start, &extra)) {
      if (extra < 0) return -1;
      held = c->admitted > c->attempts;
    } else {
      /* the spread's draw only once the adaptive rate paces: until throttling
       * answers come it is not there, and a seed gives the waits it gave
       * without it (simulate's and run's alike); the shared pace draws it
       * under its lock (one lock, not two) */
      if (!c->lazy_pace) {
        extra =
          lr_rate_reserve_drawn(c->shared, &r->guards, now, base + start, latest, &c->rng, &held);
      } else {
        int paced = r->guards.rate_adaptive && lr_rate_now(pace(c), &r->guards) > 0;
        extra = rate_reserve(c, now, base + start, latest, paced ? lr_rng_unit(&c->rng) : 0, &held);
      }
      if (extra < 0) return -1;
      c->admitted = held ? c->attempts + 1 : c->attempts; /* not held: ask again then */
      c->admit_at = start + extra;
    }
    if (!held || !r->guards.rate_headers) return extra;
    c->token_held = 1; /* until the quota lets the attempt go */
    if (base + start + extra > now) {
      c->admitted = c->attempts;
      return extra;
    }
  } else if (base + start > now) {
    c->admitted = c->attempts, c->admit_at = start;
    return 0;
  }
  /* the attempt's number in the quota's pacing, in the cold block (only
   * rate.headers comes here); without one its answer is merged as the
   * latest's (seq 0) */
  unsigned long long no_seq = 0, *seq = LR_COLD_SLOT(c, quota_seq);
  double quota = lr_quota_reserve(c->shared, base + start, latest, lr_rng_unit(&c->rng),
                                  seq ? seq : &no_seq, &held);
  if (quota < 0) return c->token_held = 0, c->quota_refused = 1, -1;
  if (held) c->token_held = 0;
  c->admitted = held ? c->attempts + 1 : c->attempts;
  c->admit_at = start + quota;
  return quota;
}

void lr_call_stop_rate_limited(luaretry_call *c, luaretry_decision *d, double start) {
  if (c->quota_refused) {
    lr_call_stop_saying(c, d, LUARETRY_REASON_RATE_LIMIT, "rate.headers",
                        "the server's RateLimit quota leaves no room before the deadline "
                        "(%.*f s; the attempt would start at %.*f s or later)",
                        lr_deadline_digits(c), c->deadline, lr_deadline_digits(c), start);
    return;
  }
  if (c->rate_remote == 2) {
    lr_call_stop_saying(c, d, LUARETRY_REASON_DEADLINE, "deadline",
                        "the deadline (%.*f s) %s while the fleet's rate limiter was asked "
                        "for a token",
                        lr_deadline_digits(c), c->deadline,
                        lr_deadline_came(c, lr_clock_now(&c->clock) - c->start));
    return;
  }
  /* Either limiter refuses a token that comes after the latest start and
   * says no more of when (the fleet's rate_reserve, lr_rate_reserve):
   * that is the time named, not the attempt's own (the call's start, as
   * often as not, whatever the wait). */
  if (c->rate_remote) {
    lr_call_stop_saying(c, d, LUARETRY_REASON_RATE_LIMIT, "rate",
                        "the fleet's rate limiter's next token (%g per second for every process) "
                        "comes too late for the deadline (%.*f s): after %.*f s, the latest an "
                        "attempt may start (one needs 1 ms)",
                        c->rules->guards.rate_limit, lr_deadline_digits(c), c->deadline,
                        lr_deadline_digits(c), lr_latest_start(c));
    return;
  }
  lr_call_stop_saying(c, d, LUARETRY_REASON_RATE_LIMIT, "rate",
                      "the rate limiter's next token (%.3f per second now) comes too late for the "
                      "deadline (%.*f s): after %.*f s, the latest an attempt may start (one needs "
                      "1 ms)",
                      lr_rate_now(pace(c), &c->rules->guards), lr_deadline_digits(c), c->deadline,
                      lr_deadline_digits(c), lr_latest_start(c));
}

/* A hedge's token and slot: now, or no hedge (nothing kept). */
static int hedge_admit(luaretry_call *c, lr_ask *a) {
  const lr_rules *r = c->rules;
  double at = c->start + a->now, base = c->guard_origin + at;
  int held = 1;
  if (c->remote && c->remote->ops->rate_reserve && !r->guards.rate_adaptive) {
    double wait = 0;
    int v = c->remote->ops->rate_reserve(c->remote->ud, at, at, at, 1e-9, lr_rng_unit(&c->rng),
                                         &c->waiter, &wait);
    if (v != LR_REMOTE_LOCAL) {
      if (v != 1 || wait != 0) return a->why = "the fleet's rate limiter has no token now", 1;
      held = 0; /* the fleet's token: nothing of this process's to hand back */
    }
  }
  double before = lr_rate_tat(pace(c));
  if (held && rate_reserve(c, base, base, base, 0, &held) != 0)
    return a->why = "the rate limiter has no token now", 1;
  if (!held) return a->why = "the rate limiter has no token now", 1;
  double after = lr_rate_tat(pace(c));
  if (!r->guards.rate_headers) return 0;
  unsigned long long seq = 0;
  double q = lr_quota_reserve(c->shared, base, base, lr_rng_unit(&c->rng), &seq, &held);
  if (q == 0 && held) {
    unsigned long long *kept = LR_COLD_SLOT(c, quota_seq);
    if (kept) *kept = seq;
    return 0;
  }
  lr_rate_give_back(pace(c), &r->guards, before, after);
  return a->why = "the server's RateLimit quota has no room now", 1;
}

static __attribute__((noinline)) int admit_slow(luaretry_call *c, lr_ask *a, luaretry_decision *d) {
  if (a->kind == LR_KIND_HEDGE) return hedge_admit(c, a);
  if (a->kind == LR_KIND_REQUEST) return 0;
  if (a->after_wait || a->kind == LR_KIND_FIRST) {
    /* as the attempt goes (luaretry_call_next): a token not asked for yet */
    if (!a->after_wait || c->admitted > c->attempts) return 0;
    if (lr_call_rate_token(c, a->at) < 0) {
      lr_call_stop_rate_limited(c, d, a->at);
      return 1;
    }
    return 0;
  }
  double extra = lr_call_rate_token(c, a->at + a->wait);
  if (extra < 0) {
    lr_call_stop_rate_limited(c, d, a->at + a->wait);
    return 1;
  }
  a->wait += extra;
  if (c->deadline > 0 && a->at + a->wait > lr_latest_start(c)) {
    lr_call_stop_starting_late(c, d, "deadline", a->at + a->wait);
    return 1;
  }
  return 0;
}

/* A retry decided now, while the adaptive rate does not pace (nearly
 * every one until a throttling answer comes): counted, no wait, in line
 * (lr_chain_admit asks it so itself when no other guard is left). */
static int admit(luaretry_call *c, lr_ask *a, luaretry_decision *d) {
  if (lr_rate_lets_retry(c, a)) return 0;
  return admit_slow(c, a, d);
}

static void record(luaretry_call *c, const lr_record *r) {
  const lr_guards *g = &c->rules->guards;
  double now = c->guard_origin + r->now;
  if (r->cls == LR_REC_SUCCESS || r->cls == LR_REC_THROTTLED)
    lr_rate_answer(pace_made(c), g, r->cls == LR_REC_THROTTLED, now, now - r->duration);
  if (g->rate_headers)
    lr_quota_answer(c->shared, g, r->o->headers, r->o->header_count,
                    c->cold ? c->cold->quota_seq : 0, now);
}

const lr_guard_ops lr_guard_rate = { "rate", admit, NULL, record };
