/* guard_breaker.c: the circuit breaker as a guard of the chain.  Every
 * attempt (a first, a retry, a hedge) is asked: closed, it goes; open, it
 * is refused; half-open, it takes a probe permit (handed back when a
 * later guard refuses it, or when its answer tells nothing: a throttling
 * answer is neutral).  A workflow's requests are not asked: the breaker
 * counts the workflow's rounds.  The fleet's view is asked first. */
#include "call_internal.h"

/* In a message: the rate rules, when it has them. */
static const char *rate_note(const lr_guards *g) {
  return lr_breaker_rated(g) ? ", or a failure or slow-call rate over its window" : "";
}

/* 1 when the breaker lets the attempt go; c->remote_said whose answer. */
static int asks(luaretry_call *c, double now) {
  const lr_rules *r = c->rules;
  c->remote_said = 0;
  if (c->remote) {
    double d = c->deadline, left = d > 0 ? d - (now - c->start) : 0;
    if (d > 0 && left <= 0) left = 1e-9; /* no time: no round trip (0 is no deadline) */
    int v = c->remote->ops->breaker_admits(c->remote->ud, 1, now, left, &c->waiter);
    if (v == LR_REMOTE_PERMIT) c->held |= 1u << LR_G_BREAKER; /* the fleet's permit */
    if (v != LR_REMOTE_LOCAL) return c->remote_said = 1, v != 0;
  }
  int permit;
  int v = lr_breaker_permit(c->shared, &r->guards, c->guard_origin + now, &permit);
  if (permit) c->held |= 1u << LR_G_BREAKER;
  return v;
}

/* After a refusal: 1 when the breaker that refused is half-open with no
 * probe permit left, 0 when it is open.  The fleet's view is asked again
 * as for an attempt that needs no permit (first_attempt 0: no round trip,
 * no permit taken), which it lets go while half-open and refuses while
 * open. */
static int half_open(luaretry_call *c, double now) {
  if (!c->remote_said) return atomic_load(&c->shared->breaker_state) == LUARETRY_BREAKER_HALF_OPEN;
  return c->remote->ops->breaker_admits(c->remote->ud, 0, now, 1e-9, &c->waiter) == 1;
}

static int admit(luaretry_call *c, lr_ask *a, luaretry_decision *d) {
  const lr_guards *g = &c->rules->guards;
  if (a->kind == LR_KIND_REQUEST) return 0;
  /* asked again as a retry goes, unless it holds its permit already */
  if (a->after_wait && (a->kind != LR_KIND_RETRY || (c->held & (1u << LR_G_BREAKER)))) return 0;
  double now = c->start + a->now;
  if (asks(c, now)) return 0;
  const char *who = lr_whose(c->remote_said);
  int half = half_open(c, now);
  if (a->kind == LR_KIND_HEDGE) {
    a->why = half ? "the circuit is half-open with no probe left" : "the circuit is open";
    return 1;
  }
  if (half)
    lr_call_stop_saying(c, d, LUARETRY_REASON_CIRCUIT_OPEN, "breaker",
                        "%scircuit is half-open with no probe left%s: its %d probe permit%s out "
                        "(it opened after %d transient failures in a row%s)",
                        who, a->after_wait ? " when the retry's wait ended" : "", g->probes,
                        g->probes == 1 ? " is" : "s are", g->failures, rate_note(g));
  else if (a->kind == LR_KIND_FIRST)
    lr_call_stop_saying(c, d, LUARETRY_REASON_CIRCUIT_OPEN, "breaker",
                        "%scircuit is open: calls fail fast for %.3f s after %d transient "
                        "failures in a row%s",
                        who, g->open_seconds, g->failures, rate_note(g));
  else if (a->after_wait)
    lr_call_stop_saying(c, d, LUARETRY_REASON_CIRCUIT_OPEN, "breaker",
                        "%scircuit opened while the call waited to retry (%d transient "
                        "failures in a row%s)",
                        who, g->failures, rate_note(g));
  else
    lr_call_stop_saying(c, d, LUARETRY_REASON_CIRCUIT_OPEN, "breaker",
                        "%scircuit opened after %d transient failures in a row%s", who, g->failures,
                        rate_note(g));
  return 1;
}

/* The permit back where it was taken: the fleet's when its view
 * answered (remote_said), else the policy's. */
static void give_back(luaretry_call *c) {
  if (!c->remote_said)
    lr_breaker_give_back(c->shared, &c->rules->guards);
  else if (c->remote->ops->permit_give_back)
    c->remote->ops->permit_give_back(c->remote->ud);
}

/* A success or an answer closes a half-open breaker and resets the count;
 * a failure counts (and reopens a half-open one); a throttling answer is
 * neutral: its permit is handed back.  The rate window takes successes,
 * answers and failures, slow when the attempt's own time was. */
static void record(luaretry_call *c, const lr_record *r) {
  const lr_guards *g = &c->rules->guards;
  double now = c->guard_origin + r->now;
  if (r->round) return;
  if (r->cls != LR_REC_THROTTLED && lr_breaker_rated(g)) {
    int slow = g->slow_seconds > 0 && r->duration >= g->slow_seconds;
    lr_breaker_record(c->shared, g, r->cls == LR_REC_FAILURE, slow, now);
    /* the fleet's window too (its store's), when it keeps one */
    if (c->remote && c->remote->ops->breaker_record)
      c->remote->ops->breaker_record(c->remote->ud, r->cls == LR_REC_FAILURE, slow, r->now);
  }
  switch (r->cls) {
  case LR_REC_SUCCESS:
  case LR_REC_ANSWERED: lr_breaker_success(c->shared, g, now); break;
  case LR_REC_FAILURE: lr_breaker_failure(c->shared, g, now); break;
  case LR_REC_THROTTLED: /* the permit back where it was taken, the fleet's too */
    give_back(c);
    break;
  }
}

const lr_guard_ops lr_guard_breaker = { "breaker", admit, give_back, record };
