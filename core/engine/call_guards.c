/* call_guards.c: what the guards (budget, breaker, client-side throttle,
 * rate limiter; the fleet's view first) say to one call, and the message
 * saying why when they refuse. */
#include <string.h>

#include "call_internal.h"

/* The local guards see the call's clock from guard_origin. */

int lr_call_budget_allows(luaretry_call *c, double now, int *remote) {
  *remote = 0;
  if (c->remote) {
    int v = c->remote->ops->budget_allows_retry(c->remote->ud, now);
    if (v != LR_REMOTE_LOCAL) return *remote = 1, v;
  }
  return lr_budget_allows_retry(c->shared, &c->rules->guards);
}

int lr_call_breaker_admits(luaretry_call *c, int first_attempt, double now, int *remote) {
  *remote = 0;
  if (c->remote) {
    double d = c->deadline, left = d > 0 ? d - (now - c->start) : 0;
    if (d > 0 && left <= 0) left = 1e-9; /* no time: no round trip (0 is no deadline) */
    int v = c->remote->ops->breaker_admits(c->remote->ud, first_attempt, now, left, &c->waiter);
    if (v != LR_REMOTE_LOCAL) return *remote = 1, v;
  }
  return lr_breaker_admits(c->shared, &c->rules->guards, first_attempt, c->guard_origin + now);
}

static double budget_tokens(luaretry_call *c, int remote) {
  return remote ? c->remote->ops->tokens(c->remote->ud) : lr_budget_tokens(c->shared);
}

/* In a breaker's message: the rate rules, when it has them. */
static const char *rate_note(const lr_guards *g) {
  return lr_breaker_rated(g) ? ", or a failure or slow-call rate over its window" : "";
}

/* ---- client-side throttling and the rate limiter (pace.c), on the
 * guard clock: `at` is the call's clock */

/* The throttle asked about an attempt at `at`: the remote view's counts
 * first (one request counted there), the local ones counted either way so
 * that they are warm when the remote view goes; one draw either way, so a
 * seed gives the same schedule with or without a fleet.  *remote: whose
 * counts decided. */
static int throttle_refuses(luaretry_call *c, double at, int *remote) {
  const lr_guards *g = &c->rules->guards;
  *remote = 0;
  if (!(g->throttle_k > 0)) return 0;
  double u = lr_rng_unit(&c->rng), r = LR_REMOTE_LOCAL;
  if (c->remote && c->remote->ops->throttle_request)
    r = c->remote->ops->throttle_request(c->remote->ud, at);
  int local = lr_throttle_admits(c->shared, g, c->guard_origin + at, u);
  if (r >= 0) return *remote = 1, u < r;
  return !local;
}

static void stop_throttled(luaretry_call *c, luaretry_decision *d, double at, int remote) {
  const lr_guards *g = &c->rules->guards;
  double r = remote && c->remote->ops->throttle_refusal
               ? c->remote->ops->throttle_refusal(c->remote->ud, at)
               : LR_REMOTE_LOCAL;
  if (r < 0) r = lr_throttle_refusal(c->shared, g, c->guard_origin + at);
  lr_call_stop_saying(c, d, LUARETRY_REASON_THROTTLE, "throttle",
                      "%sclient-side throttle refuses "
                      "(it refuses %.0f%% of attempts now: fewer than 1 in %g was accepted over "
                      "%g s)",
                      remote ? "the fleet's " : "the ", 100 * r, g->throttle_k, g->throttle_window);
}

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
  double latest = c->deadline > 0 ? c->start + c->deadline : -1;
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

/* A token for the attempt that would start `start` seconds into the call
 * (the fleet's limiter, else this process's), then, when the policy reads
 * the server's RateLimit fields, a slot under its quota (quota.c), asked
 * when the token comes: a quota read meanwhile counts.  The extra wait, or
 * -1 when it would come past the deadline (nothing reserved then).  Either
 * may hand out a time to ask again instead (admitted stays, and
 * luaretry_call_next asks then): adaptive, past the server's window, for a
 * later attempt (a retry after its backoff) whose token is free when it
 * comes, and for the quota of an attempt whose token comes later. */
double lr_call_rate_token(luaretry_call *c, double start) {
  const lr_rules *r = c->rules;
  double base = c->guard_origin + c->start;
  double latest = c->deadline > 0 ? base + c->deadline : -1;
  double now = base + (lr_clock_now(&c->clock) - c->start);
  int held = 1;
  double extra = 0;
  c->quota_refused = 0;
  if (!c->token_held) {
    if (remote_rate(c, start, &extra)) {
      if (extra < 0) return -1;
      held = c->admitted > c->attempts;
    } else {
      extra = lr_rate_reserve(c->shared, &r->guards, now, base + start, latest,
                              r->guards.rate_adaptive ? lr_rng_unit(&c->rng) : 0, &held);
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
  double quota =
    lr_quota_reserve(c->shared, base + start, latest, lr_rng_unit(&c->rng), &c->quota_seq, &held);
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
                        "(%.3f s; the attempt would start at %.3f s or later)",
                        c->deadline, start);
    return;
  }
  if (c->rate_remote == 2) {
    lr_call_stop_saying(c, d, LUARETRY_REASON_DEADLINE, "deadline",
                        "the deadline (%.3f s) passed while the fleet's rate limiter was asked "
                        "for a token",
                        c->deadline);
    return;
  }
  if (c->rate_remote) {
    lr_call_stop_saying(c, d, LUARETRY_REASON_RATE_LIMIT, "rate",
                        "the fleet's rate limiter's next token (%g per second for every process) "
                        "comes after the deadline (%.3f s; the attempt would start at %.3f s or "
                        "later)",
                        c->rules->guards.rate_limit, c->deadline, start);
    return;
  }
  lr_call_stop_saying(c, d, LUARETRY_REASON_RATE_LIMIT, "rate",
                      "the rate limiter's next token "
                      "(%.3f per second now) comes after the deadline (%.3f s; the attempt would "
                      "start at %.3f s or later)",
                      lr_rate_now(c->shared, &c->rules->guards), c->deadline, start);
}

/* In a refusal's message: whose counts decided. */
static const char *whose(int remote) { return remote ? "the fleet's " : "the "; }

/* After a probe permit's round trip (lr_call_new): the first attempt has
 * what is left of the deadline, or the call stops if nothing is. */
void lr_call_started_late(luaretry_call *c) {
  double elapsed = lr_clock_now(&c->clock) - c->start;
  if (elapsed < c->deadline) {
    double t = lr_call_timeout_at(c, elapsed);
    if (t < c->next_timeout) c->next_timeout = t;
    return;
  }
  luaretry_decision d;
  memset(&d, 0, sizeof d);
  lr_call_stop_saying(c, &d, LUARETRY_REASON_DEADLINE, "deadline",
                      "the deadline (%.3f s) passed "
                      "while the fleet was asked for a probe permit",
                      c->deadline);
  lr_count(c->shared, LR_M_UNATTEMPTED, 1);
}

/* A call the guards refuse before its first attempt (an open circuit, the
 * client-side throttle) stops before it touches anything. */
void lr_call_refused_at_begin(luaretry_call *c) {
  const lr_rules *rules = c->rules;
  int remote_said;
  if (rules->guards.breaker && !lr_call_breaker_admits(c, 1, c->start, &remote_said)) {
    /* An open circuit: the call stops before it touches anything. */
    luaretry_decision d;
    memset(&d, 0, sizeof d);
    lr_call_stop_saying(c, &d, LUARETRY_REASON_CIRCUIT_OPEN, "breaker",
                        "%scircuit is open: "
                        "calls fail fast for %.3f s after %d transient failures in a row%s",
                        whose(remote_said), rules->guards.open_seconds, rules->guards.failures,
                        rate_note(&rules->guards));
    lr_count(c->shared, LR_M_UNATTEMPTED, 1);
  } else if (throttle_refuses(c, c->start, &remote_said)) {
    luaretry_decision d;
    memset(&d, 0, sizeof d);
    stop_throttled(c, &d, c->start, remote_said);
    lr_count(c->shared, LR_M_UNATTEMPTED, 1);
  }
}

/* The remote view brought up to date, within what is left of the
 * deadline; a cancel ends the round trip at once.  The attempt's timeout
 * is what is left after it.  1 when the call stopped (d filled). */
static int refresh_remote(luaretry_call *c, double *now, luaretry_decision *d) {
  double left = c->deadline > 0 ? c->deadline - (*now - c->start) : 0;
  if (c->deadline <= 0 || left > 0) c->remote->ops->refresh(c->remote->ud, *now, left, &c->waiter);
  *now = lr_clock_now(&c->clock);
  double elapsed = *now - c->start;
  if (atomic_load(&c->waiter.cancelled)) {
    lr_call_stop(c, d, LUARETRY_REASON_CANCELLED, "cancel");
    return 1;
  }
  if (c->deadline > 0 && elapsed >= c->deadline) {
    lr_call_stop_saying(c, d, LUARETRY_REASON_DEADLINE, "deadline",
                        "the deadline (%.3f s) passed "
                        "while the fleet's counts were brought up to date",
                        c->deadline);
    return 1;
  }
  double t = lr_call_timeout_at(c, elapsed);
  if (c->deadline > 0 && t < c->next_timeout) c->next_timeout = t;
  return 0;
}

/* Before a retry, after its wait: the guards are asked again, so a retry
 * decided on counts that were stale is not made once the circuit opened or
 * (with the fleet's counts, brought up to date here) the fleet's budget
 * is spent.  The local budget is not asked again: its counts were current
 * when the retry was decided.  1 when the call stopped (d filled). */
int lr_call_refused_after_wait(luaretry_call *c, luaretry_decision *d) {
  const lr_guards *g = &c->rules->guards;
  /* a fleet-wide throttle's counts are brought up to date too: the next
   * decision then sees the fleet as of this attempt */
  if (!g->budget && !g->breaker && !(c->remote && g->throttle_k > 0)) return 0;
  double now = lr_clock_now(&c->clock);
  int remote_said = 0;
  if (c->remote && refresh_remote(c, &now, d)) {
    /* stopped: the deadline passed, or the call was cancelled */
  } else if (g->breaker && !lr_call_breaker_admits(c, 0, now, &remote_said)) {
    lr_call_stop_saying(c, d, LUARETRY_REASON_CIRCUIT_OPEN, "breaker",
                        "%scircuit opened while "
                        "the call waited to retry (%d transient failures in a row%s)",
                        whose(remote_said), g->failures, rate_note(g));
  } else if (g->budget && c->remote &&
             c->remote->ops->budget_allows_retry(c->remote->ud, now) == 0) {
    lr_call_stop_saying(c, d, LUARETRY_REASON_BUDGET, "budget",
                        "the fleet's retry budget was spent "
                        "while the call waited to retry: %.3f of %g tokens left, retries need more "
                        "than half",
                        budget_tokens(c, 1), g->max_tokens);
  } else {
    return 0;
  }
  lr_count(c->shared, LR_M_UNATTEMPTED, 1);
  if (c->observer) c->observer(c->observer_ud, NULL, d);
  return 1;
}

/* The verdict's effect on the guards; 1 when the verdict ends the call
 * (d filled), 0 when a transient outcome may be retried. */
int lr_call_judged(luaretry_call *c, const luaretry_outcome *o, const lr_verdict *v, double now,
                   luaretry_decision *d) {
  const lr_guards *g = &c->rules->guards;
  int guarded = g->budget || g->breaker;
  /* the remote view counts for the throttle too (its accepts) */
  const lr_remote *remote = c->remote && (guarded || g->throttle_k > 0) ? c->remote : NULL;
  double guard_now = c->guard_origin + now;
  if (v->cls != LUARETRY_CLASS_ERROR && lr_breaker_rated(g)) {
    int failed = v->cls == LUARETRY_CLASS_TRANSIENT && !v->throttled;
    int slow = g->slow_seconds > 0 && d->elapsed - c->attempt_start >= g->slow_seconds;
    lr_breaker_record(c->shared, g, failed, slow, guard_now);
    if (c->remote && c->remote->ops->breaker_record)
      c->remote->ops->breaker_record(c->remote->ud, failed, slow, now);
  }
  if (v->cls != LUARETRY_CLASS_ERROR) {
    lr_throttle_record(c->shared, g, v->cls != LUARETRY_CLASS_TRANSIENT, guard_now);
    if (v->cls == LUARETRY_CLASS_SUCCESS || v->throttled)
      lr_rate_answer(c->shared, g, v->throttled, guard_now);
    if (g->rate_headers)
      lr_quota_answer(c->shared, g, o->headers, o->header_count, c->quota_seq, guard_now);
  }
  switch (v->cls) {
  case LUARETRY_CLASS_SUCCESS:
    if (guarded) lr_guards_success(c->shared, g, guard_now);
    if (remote) remote->ops->record(remote->ud, LR_REMOTE_SUCCESS, now);
    lr_call_stop(c, d, LUARETRY_REASON_SUCCESS, v->rule);
    return 1;
  case LUARETRY_CLASS_FINAL:
    if (guarded) lr_guards_answered(c->shared, g, guard_now);
    if (remote) remote->ops->record(remote->ud, LR_REMOTE_ANSWERED, now);
    lr_call_stop_final(c, d, v);
    return 1;
  case LUARETRY_CLASS_TRANSIENT:
    if (v->throttled) {
      lr_count(c->shared, LR_M_THROTTLED, 1);
      d->throttled = 1;
      if (guarded) lr_guards_throttled(c->shared, g, guard_now);
    } else if (guarded) {
      lr_guards_failure(c->shared, g, guard_now);
    }
    if (remote)
      remote->ops->record(remote->ud, v->throttled ? LR_REMOTE_THROTTLED : LR_REMOTE_FAILURE, now);
    if (!o->not_repeatable) return 0;
    lr_call_stop_saying(c, d, LUARETRY_REASON_FINAL, "idempotency",
                        "transient, but %s%s is not "
                        "idempotent and may have taken effect",
                        o->method ? o->method : "the operation", o->method ? " request" : "");
    return 1;
  case LUARETRY_CLASS_ERROR:
  case LUARETRY_CLASS_THROTTLING: /* the judge never says it */ break;
  }
  lr_call_stop_saying(c, d, LUARETRY_REASON_POLICY_ERROR, v->rule, "%s", v->message);
  return 1;
}

/* The limits that end a call before its wait: attempts, budget, breaker;
 * 1 when one did (d filled). */
int lr_call_limited(luaretry_call *c, double now, luaretry_decision *d) {
  const lr_guards *g = &c->rules->guards;
  if (c->max_attempts > 0 && c->started >= c->max_attempts) {
    int allowed = c->allowance >= 0 && c->max_attempts < lr_call_policy_attempts(c);
    lr_call_stop_saying(c, d, LUARETRY_REASON_EXHAUSTED, allowed ? "retries" : "max_attempts",
                        "gave up after %d attempt%s over %.3f s%s", c->started,
                        c->started == 1 ? "" : "s", d->elapsed,
                        allowed ? " (the caller's retries: it retries itself)" : "");
    return 1;
  }
  int remote_said;
  if (g->budget && !lr_call_budget_allows(c, now, &remote_said)) {
    lr_call_stop_saying(c, d, LUARETRY_REASON_BUDGET, "budget",
                        "%sretry budget refuses: %.3f of "
                        "%g tokens left, retries need more than half",
                        whose(remote_said), budget_tokens(c, remote_said), g->max_tokens);
    return 1;
  }
  if (g->breaker && !lr_call_breaker_admits(c, 0, now, &remote_said)) {
    lr_call_stop_saying(c, d, LUARETRY_REASON_CIRCUIT_OPEN, "breaker",
                        "%scircuit opened after %d "
                        "transient failures in a row%s",
                        whose(remote_said), g->failures, rate_note(g));
    return 1;
  }
  if (throttle_refuses(c, now, &remote_said)) {
    stop_throttled(c, d, now, remote_said);
    return 1;
  }
  return 0;
}
