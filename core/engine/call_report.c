/* call_report.c: an attempt's outcome judged into a decision: the
 * verdict's class, the wait (backoff, throttling backoff, the server's or
 * the script's), the deadline, and the on_retry hook. */
#include <math.h>
#include <string.h>

#include "call_internal.h"

/* The policy's jitter over a server's (or a script's) wait: uniform in
 * [0, jitter_max] for every kind but none. */
static double spread(luaretry_call *c) {
  const lr_backoff *b = &c->rules->backoff;
  return b->jitter == LUARETRY_JITTER_NONE ? 0 : lr_rng_uniform(&c->rng, 0, b->jitter_max);
}

/* The wait a transient outcome earns before any server hint (the
 * throttling backoff when `throttled`: the outcome, or one of its round,
 * was a throttling answer); 0 on success, -1 on a policy error (message
 * in err). */
static int backoff_wait(luaretry_call *c, const lr_verdict *v, int throttled,
                        const lr_attempt_ctx *ctx, double *w, luaretry_wait_source *src,
                        lr_verdict *err) {
  long n = c->attempts - 1; /* retry n follows attempt n + 1 */
  if (v->wait >= 0 && !v->server) {
    *w = v->wait + (v->jitter ? spread(c) : 0);
    *src = LUARETRY_WAIT_SCRIPT;
    return 0;
  }
  int capped;
  if (throttled) { /* the throttling backoff, whatever the policy's backoff is */
    /* the last wait is kept in the cold block: most calls are never throttled */
    double alone = c->rules->throttle_backoff.initial;
    lr_call_cold *cold = lr_call_cold_get(c);
    *w = lr_backoff_wait(&c->rules->throttle_backoff, (uint64_t)n,
                         cold ? &cold->throttle_previous : &alone, &c->rng, &capped);
    *src = capped ? LUARETRY_WAIT_CLAMPED : LUARETRY_WAIT_THROTTLE;
    return 0;
  }
  if (c->rules->backoff.kind == LUARETRY_BACKOFF_SCRIPT) {
    err->cls = LUARETRY_CLASS_ERROR; /* made only here: the script's backoff may fail */
    err->wait = -1;
    err->jitter = err->server = err->reason = 0;
    err->rule = v->rule;
    err->message[0] = '\0';
    if (c->judge->backoff(c->judge->ud, ctx, n, c->previous, w, err) != 0) return -1;
    c->previous = *w;
    *src = LUARETRY_WAIT_BACKOFF;
    return 0;
  }
  *w = lr_backoff_wait(&c->rules->backoff, (uint64_t)n, &c->previous, &c->rng, &capped);
  *src = capped ? LUARETRY_WAIT_CLAMPED : LUARETRY_WAIT_BACKOFF;
  return 0;
}

/* What a transient answer asks of the wait: the server's Retry-After, or
 * a wait the script read from the server (a rate-limit reset); -1: none.
 * +infinity is more than any max_retry_after; NaN says nothing (-1). */
static double asked_of(const luaretry_outcome *o, const lr_verdict *v) {
  double asked = o->retry_after >= 0 ? o->retry_after : -1;
  if (v->server && v->wait > asked) asked = v->wait;
  return asked;
}

/* A transient answer while others of its round go on: what it asked is
 * kept for the answer that decides the round (the server's "not before"
 * holds whichever attempt heard it). */
static void round_keeps(luaretry_call *c, const luaretry_outcome *o, const lr_verdict *v) {
  double asked = c->rules->retry_after ? asked_of(o, v) : -1;
  if (asked < 0 && !v->throttled) return; /* nearly every hedge: nothing kept */
  lr_call_cold *cold = lr_call_cold_get(c);
  if (!cold) return;
  if (!cold->round_set) cold->round_asked = -1, cold->round_throttled = 0;
  cold->round_set = 1;
  if (asked > cold->round_asked) cold->round_asked = asked;
  cold->round_throttled |= v->throttled;
}

/* What the round's other answers asked, once, for the answer that decides
 * it: -1 for none; *throttled set when one was a throttling answer. */
static double round_asked(luaretry_call *c, int *throttled) {
  lr_call_cold *cold = c->cold;
  if (!cold || !cold->round_set) return -1;
  cold->round_set = 0;
  *throttled |= cold->round_throttled;
  return cold->round_asked;
}

/* A server's Retry-After (or a wait the script read from the server, such
 * as a rate-limit reset; an earlier answer of the round's, `before`) over
 * the wait w: never earlier than asked, and spread upward by the policy's
 * jitter (clients told the same instant must not all come back at it).
 * Of both, the longer counts.  1 when it ends the call instead (d
 * filled). */
static int server_wait(luaretry_call *c, const luaretry_outcome *o, const lr_verdict *v,
                       double before, double *w, luaretry_wait_source *src, luaretry_decision *d) {
  const lr_rules *r = c->rules;
  if (!r->retry_after) return 0;
  double asked = asked_of(o, v);
  if (before > asked) asked = before;
  if (asked < 0) return 0;
  if (asked > r->max_retry_after) {
    lr_call_stop_saying(c, d, LUARETRY_REASON_SERVER_WAIT_TOO_LONG, "max_retry_after",
                        "the server asked for %.3f s, more than max_retry_after (%.3f s)", asked,
                        r->max_retry_after);
    return 1;
  }
  double extra = spread(c);
  if (asked + extra > *w) {
    *w = asked + extra;
    *src = LUARETRY_WAIT_SERVER;
  }
  return 0;
}

/* A transient outcome: the wait (backoff, or the server's or the
 * script's), then the chain of guards for a retry starting after it (max
 * attempts, the deadline, the breaker, admission, the budget, the rate
 * limiter's token: its extra wait), then a retry, or a stop. */
static void retry_or_stop(luaretry_call *c, const luaretry_outcome *o, const lr_verdict *v,
                          const lr_attempt_ctx *ctx, luaretry_decision *d) {
  double w;
  luaretry_wait_source src;
  lr_verdict err;
  int throttled = v->throttled;
  double before = round_asked(c, &throttled); /* what the round's others asked */
  if (backoff_wait(c, v, throttled, ctx, &w, &src, &err) != 0) {
    if (atomic_load_explicit(&c->waiter.cancelled, memory_order_relaxed))
      lr_call_stop_saying(c, d, LUARETRY_REASON_CANCELLED, "cancel", "%s", err.message);
    else
      lr_call_stop_saying(c, d, LUARETRY_REASON_POLICY_ERROR, err.rule, "%s", err.message);
    return;
  }
  if (server_wait(c, o, v, before, &w, &src, d)) return;
  /* the retry asks every guard, for when it would start */
  lr_ask a = { LR_KIND_RETRY, 0, src == LUARETRY_WAIT_SERVER, d->elapsed + w, d->elapsed, 0, NULL };
  if (lr_chain_admit(c, &a, d)) return;
  if (a.wait > 0) w += a.wait, src = LUARETRY_WAIT_RATE;
  d->retry = 1;
  d->reason = LUARETRY_REASON_NONE;
  d->wait = w;
  lr_count_retry(c->shared, lr_clamp_ns(w));
  d->wait_source = src;
  d->next_timeout = c->next_timeout = lr_call_timeout_at(c, d->elapsed + w);
  c->attempt_start = d->elapsed + w; /* a host that does not ask next */
  d->rule = v->rule;
  if (c->judge->on_retry) {
    char *b = lr_call_buffer(LR_COLD_SLOT(c, hook_error));
    if (b && c->judge->on_retry(c->judge->ud, o, d, ctx, b, MESSAGE_SIZE) != 0) d->hook_error = b;
  }
}

/* Takes attempt `id` (0: the oldest) out of the flight into *f; an
 * attempt the host did not announce is numbered here.  -1: no such id. */
static int land(luaretry_call *c, int id, lr_flight *f) {
  if (c->in_flight == 0) {
    if (id != 0) return -1;
    f->id = ++c->started;
    f->hedge = 0;
    f->start = -1;
    return 0;
  }
  int k = 0;
  if (id != 0)
    while (k < c->in_flight && c->flight[k].id != id) k++;
  if (k == c->in_flight) return -1;
  *f = c->flight[k];
  memmove(&c->flight[k], &c->flight[k + 1], (size_t)(c->in_flight - k - 1) * sizeof *f);
  c->in_flight--;
  if (f->hedge) c->hedges_in_flight--;
  return 0;
}

/* A transient outcome while other attempts of the call are in flight:
 * judged and counted, but the call waits for them (no retry yet), and no
 * more hedges go this round: a failure is the backoff's to space out,
 * never a reason to send more at once. */
static int others_go_on(luaretry_call *c, const char *rule, luaretry_decision *d) {
  if (c->in_flight == 0) return 0;
  c->hedge_closed = 1;
  d->rule = rule;
  d->retry = 0;
  d->reason = LUARETRY_REASON_NONE;
  d->in_flight = c->in_flight;
  return 1;
}

/* A round's answer (LUARETRY_CALL_WORKFLOW_REQUEST): the guards count the
 * enclosing call's outcome, not this one's, and a round never retries: an
 * answer ends it, but a transient one waits for the attempts still in
 * flight.  1 when the round is over or waits (d filled). */
static int round_over(luaretry_call *c, const lr_verdict *v, luaretry_decision *d) {
  switch (v->cls) {
  case LUARETRY_CLASS_SUCCESS: lr_call_stop(c, d, LUARETRY_REASON_SUCCESS, v->rule); return 1;
  case LUARETRY_CLASS_FINAL: lr_call_stop_final(c, d, v); return 1;
  case LUARETRY_CLASS_TRANSIENT:
    d->throttled = v->throttled;
    if (!others_go_on(c, v->rule, d))
      lr_call_stop_saying(c, d, LUARETRY_REASON_FINAL, v->rule,
                          "transient: the round is over, the enclosing call decides");
    return 1;
  case LUARETRY_CLASS_ERROR:
  case LUARETRY_CLASS_THROTTLING: break;
  }
  lr_call_stop_saying(c, d, LUARETRY_REASON_POLICY_ERROR, v->rule, "%s", v->message);
  return 1;
}

/* The verdict's class, as the guards record it. */
static lr_rec_class rec_class(const lr_verdict *v) {
  return v->cls == LUARETRY_CLASS_SUCCESS ? LR_REC_SUCCESS
         : v->cls == LUARETRY_CLASS_FINAL ? LR_REC_ANSWERED
         : v->throttled                   ? LR_REC_THROTTLED
                                          : LR_REC_FAILURE;
}

/* The verdict's effect: recorded once by the guards (a policy error by
 * none: the service told nothing); 1 when the verdict ends the call (d
 * filled), 0 when a transient outcome may be retried. */
static int judged(luaretry_call *c, const luaretry_outcome *o, const lr_verdict *v, double now,
                  double duration, luaretry_decision *d) {
  if (v->cls == LUARETRY_CLASS_ERROR || v->cls == LUARETRY_CLASS_THROTTLING) {
    if (atomic_load_explicit(&c->waiter.cancelled, memory_order_relaxed))
      lr_call_stop_saying(c, d, LUARETRY_REASON_CANCELLED, "cancel", "%s", v->message);
    else
      lr_call_stop_saying(c, d, LUARETRY_REASON_POLICY_ERROR, v->rule, "%s", v->message);
    return 1;
  }
  if (c->rec_told || c->remote) { /* rec_told holds rec_plain */
    lr_record r = { rec_class(v), o, now, duration, c->one_round };
    lr_chain_record(c, &r);
  }
  if (v->throttled && v->cls == LUARETRY_CLASS_TRANSIENT) {
    if (!c->one_round) lr_count(c->shared, LR_M_THROTTLED, 1);
    d->throttled = 1;
  }
  if (c->one_round) return round_over(c, v, d);
  switch (v->cls) {
  case LUARETRY_CLASS_SUCCESS: lr_call_stop(c, d, LUARETRY_REASON_SUCCESS, v->rule); return 1;
  case LUARETRY_CLASS_FINAL: lr_call_stop_final(c, d, v); return 1;
  default: break;
  }
  if (!o->not_repeatable) return 0;
  lr_call_stop_saying(c, d, LUARETRY_REASON_FINAL, "idempotency",
                      "transient, but %s%s is not idempotent and may have taken effect",
                      o->method ? o->method : "the operation", o->method ? " request" : "");
  return 1;
}

static luaretry_code report(luaretry_call *c, int id, const luaretry_outcome *o,
                            const luaretry_class *forced, luaretry_decision *d) {
  if (!o || !d)
    return lr_call_refuse_null(c, id ? "luaretry_call_report_attempt" : "luaretry_call_report",
                               !o ? "the outcome" : "d");
  lr_decision_clear(d);
  if (!o->headers && o->header_count) { /* the script's info.headers would read them */
    lr_call_say(LR_COLD_SLOT(c, errmsg), "the outcome has %zu headers and no array of them",
                o->header_count);
    return LUARETRY_E_ARG;
  }
  if (c->stopped) {
    lr_call_say(LR_COLD_SLOT(c, errmsg), "the call already stopped (%s); begin a new one",
                luaretry_reason_name(c->reason));
    return LUARETRY_E_STATE;
  }
  lr_flight f;
  if (land(c, id, &f) != 0) {
    lr_call_say(LR_COLD_SLOT(c, errmsg), "attempt %d is not in flight", id);
    return LUARETRY_E_ARG;
  }
  ++c->attempts;
  lr_chain_sent(c);
  lr_call_unseen_failure(c, o);
  d->attempt = f.id;
  d->hedge = f.hedge;
  double now = lr_clock_now(&c->clock);
  d->elapsed = now - c->start;
  /* the attempt's own time: the slow-call rule's, the percentile's */
  double duration = d->elapsed - (f.start >= 0 ? f.start : c->attempt_start);
  if (f.start >= 0 && c->rules->hedge.percentile > 0 && (o->status || !o->error))
    lr_latency_record(c->rules->hedge.latency, duration);
  if (atomic_load_explicit(&c->waiter.cancelled, memory_order_relaxed)) {
    lr_call_stop(c, d, LUARETRY_REASON_CANCELLED, "cancel");
    return LUARETRY_OK;
  }
  /* Field by field: zeroing the 512-byte message on every decision cost
   * more than the rest of the arithmetic. */
  lr_verdict v;
  v.cls = LUARETRY_CLASS_TRANSIENT;
  v.wait = -1;
  v.jitter = v.server = v.reason = 0;
  v.throttled = 0;
  v.rule = "simulate";
  v.message[0] = '\0';
  lr_attempt_ctx ctx = lr_call_context(c, d->attempt, d->elapsed);
  ctx.hedge = f.hedge;
  c->judge->classify(c->judge->ud, o, &ctx, &v);
  /* A simulation forces the class, but the judge still runs: a wait the
   * script chooses, and its errors, are part of the schedule. */
  if (forced && v.cls != LUARETRY_CLASS_ERROR) {
    v.throttled =
      *forced == LUARETRY_CLASS_THROTTLING || (v.throttled && *forced == LUARETRY_CLASS_TRANSIENT);
    v.cls = *forced == LUARETRY_CLASS_THROTTLING ? LUARETRY_CLASS_TRANSIENT : *forced;
  }
  if (judged(c, o, &v, now, duration, d)) {
    if (f.hedge && (v.cls == LUARETRY_CLASS_SUCCESS || v.cls == LUARETRY_CLASS_FINAL))
      lr_count(c->shared, LR_M_HEDGES_WON, 1);
    return LUARETRY_OK;
  }
  if (others_go_on(c, v.rule, d)) {
    round_keeps(c, o, &v);
    return LUARETRY_OK;
  }
  retry_or_stop(c, o, &v, &ctx, d);
  return LUARETRY_OK;
}

static luaretry_code observed(luaretry_call *c, const luaretry_outcome *o, luaretry_decision *d,
                              luaretry_code rc) {
  if (rc == LUARETRY_OK) lr_call_observe(c, o, d);
  return rc;
}

luaretry_code luaretry_call_report(luaretry_call *c, const luaretry_outcome *o,
                                   luaretry_decision *d) {
  if (!lr_call_ok(c)) return LUARETRY_E_ARG;
  return observed(c, o, d, report(c, 0, o, NULL, d));
}

luaretry_code luaretry_call_report_attempt(luaretry_call *c, int attempt, const luaretry_outcome *o,
                                           luaretry_decision *d) {
  if (!lr_call_ok(c)) return LUARETRY_E_ARG;
  if (attempt <= 0) { /* 0 is report()'s "the one attempt"; say so, not a past failure */
    if (d) lr_decision_clear(d);
    lr_call_say(LR_COLD_SLOT(c, errmsg), "attempt %d is not an attempt number (they count from 1)",
                attempt);
    return LUARETRY_E_ARG;
  }
  return observed(c, o, d, report(c, attempt, o, NULL, d));
}

luaretry_code lr_call_report_class(luaretry_call *c, const luaretry_outcome *o,
                                   luaretry_class forced, luaretry_decision *d) {
  return observed(c, o, d, report(c, 0, o, &forced, d));
}
