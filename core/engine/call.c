/* call.c: a call's life (begin, next, free) and the step API's small
 * questions.  The state machine knows nothing of HTTP or Lua: the
 * policy's judge classifies, the engine counts, computes and decides.  A
 * call in flight is one struct (call_internal.h) and nothing more: its
 * rules and judge belong to the policy's load it began under.  Its other
 * files: chain.c and guard_*.c, call_report.c, call_hedge.c, call_run.c. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call_internal.h"

void luaretry_outcome_init(luaretry_outcome *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->retry_after = -1;
}

void luaretry_request_init(luaretry_request *r) {
  if (r) memset(r, 0, sizeof *r);
}

void luaretry_call_options_init(luaretry_call_options *o) {
  if (o) memset(o, 0, sizeof *o);
}

/* The host's deadline (an absolute time on the monotonic clock) as
 * seconds into the call, when it comes before the policy's.  1 when it
 * has passed already, or is no time at all (NaN, negative): the call
 * stops at once.  On the virtual clock the time left at the start counts. */
static int host_deadline(luaretry_call *c, double at) {
  c->deadline = c->rules->deadline;
  if (isnan(at) || at < 0) return 1;
  if (isinf(at)) return 0; /* never: the policy's alone */
  double left = at - lr_monotonic_now();
  if (left <= 0) return 1;
  if (c->deadline <= 0 || left < c->deadline) c->deadline = left;
  return 0;
}

static void stop_late(luaretry_call *c, double at) {
  luaretry_decision d;
  memset(&d, 0, sizeof d);
  if (isnan(at) || at < 0)
    lr_call_stop_saying(c, &d, LUARETRY_REASON_DEADLINE, "deadline",
                        "the call's deadline (%g) is not a time on the monotonic clock", at);
  else {
    double ago = lr_monotonic_now() - at;
    lr_call_stop_saying(c, &d, LUARETRY_REASON_DEADLINE, "deadline",
                        "the call's deadline passed %.*f s before it began", lr_seconds_digits(ago),
                        ago);
  }
  lr_count_unattempted(c);
}

double luaretry_clock_now(void) { return lr_monotonic_now(); }

double luaretry_deadline_in(double seconds) { return lr_monotonic_now() + seconds; }

luaretry_code lr_call_new(const lr_judge *j, const lr_rules *rules, long max_attempts,
                          lr_shared *shared, const lr_remote *remote,
                          const luaretry_call_options *o, luaretry_call **out) {
  *out = NULL;
  luaretry_call *c = calloc(1, sizeof *c);
  if (!c) {
    if (j->release) j->release(j->ud);
    return LUARETRY_E_NOMEM;
  }
  unsigned flags = o ? o->flags : 0;
  c->magic = LR_CALL_MAGIC;
  c->judge = j;
  c->rules = rules;
  c->max_attempts = max_attempts > 0 ? max_attempts : rules->max_attempts;
  c->allowance = -1;
  if (flags & LUARETRY_CALL_RETRIES) {
    /* one layer retries: what the caller lets this call make, at most */
    c->allowance = o->retries > INT_MAX - 1 ? INT_MAX - 1 : (int)o->retries;
    if (c->max_attempts <= 0 || c->allowance + 1 < c->max_attempts)
      c->max_attempts = c->allowance + 1;
  }
  c->clock.is_virtual = (flags & LUARETRY_CALL_VIRTUAL_TIME) != 0;
  c->no_hedge = (flags & LUARETRY_CALL_NO_HEDGE) != 0;
  c->one_round = (flags & LUARETRY_CALL_WORKFLOW_REQUEST) != 0;
  /* The guards see a virtual clock from the real time at its start: calls
   * begun apart stay apart, so they share a breaker sensibly. */
  if (c->clock.is_virtual) c->guard_origin = lr_monotonic_now();
  lr_waiter_init(&c->waiter);
  c->shared = shared;
  c->remote = remote && remote->ops ? remote : NULL;
  const lr_guards *gd = &rules->guards;
  c->lazy_pace = (flags & LR_CALL_LAZY_PACE) && c->remote && c->remote->lazy_sent && gd->rate &&
                 gd->rate_adaptive && !gd->rate_headers && !(gd->rate_limit > 0);
  if ((flags & LUARETRY_CALL_ISOLATED) || !shared) {
    c->lazy_pace = 0;
    /* a probe or a simulation: the policy's guards stay untouched */
    lr_call_cold *cold = lr_call_cold_get(c);
    if (cold && (cold->own = lr_aligned_calloc(sizeof *cold->own)))
      lr_shared_init(cold->own, &rules->guards);
    c->shared = cold ? cold->own : NULL;
  }
  if (!c->shared || ((flags & LUARETRY_CALL_SEED) ? (lr_rng_seed(&c->rng, o->seed), 0)
                                                  : lr_rng_seed_os(&c->rng) != 0)) {
    luaretry_code rc = c->shared ? LUARETRY_E_SYSTEM : LUARETRY_E_NOMEM;
    luaretry_call_free(c);
    return rc;
  }
  c->flight = &c->one;
  /* The invocation id from a stream of its own, derived from the call's:
   * the jitter's draws stay what they were without it. */
  c->invocation = c->rng.s[0] ^ c->rng.s[3] ^ 0x6c72696e766f6b65ull;
  c->start = lr_clock_now(&c->clock);
  c->deadline = rules->deadline;
  c->previous = rules->backoff.initial;
  int late = (flags & LUARETRY_CALL_DEADLINE) && host_deadline(c, o->deadline);
  c->next_timeout = lr_call_timeout_at(c, 0);
  lr_chain_init(c);
  /* a workflow's call: the rate limiter, header pacing, admission and
   * hedging's bound are asked by its requests (their calls), not its rounds */
  if ((flags & LUARETRY_CALL_WORKFLOW) && !c->one_round)
    lr_chain_narrow(c, (1u << LR_G_ADMISSION) | (1u << LR_G_HEDGING) | (1u << LR_G_RATE));
  if (!c->one_round) lr_count(c->shared, LR_M_CALLS, 1); /* a round's call was counted */
  if (late)
    stop_late(c, o->deadline);
  else
    lr_chain_begin(c);
  if (!c->stopped && !c->one_round && c->remote && c->deadline > 0) lr_call_started_late(c);
  *out = c;
  return LUARETRY_OK;
}

/* Out of line and cold: the steps' hot path carries only the test. */
luaretry_code lr_call_refuse_null(luaretry_call *c, const char *fn, const char *arg) {
  lr_call_say(LR_COLD_SLOT(c, errmsg), "%s: %s is NULL", fn, arg);
  return LUARETRY_E_ARG;
}

luaretry_code luaretry_call_next(luaretry_call *c, luaretry_decision *d) {
  if (!lr_call_ok(c)) return LUARETRY_E_ARG;
  if (!d) return lr_call_refuse_null(c, "luaretry_call_next", "d");
  lr_decision_clear(d);
  d->attempt = c->started; /* hedges that were cancelled were started too */
  d->elapsed = lr_clock_now(&c->clock) - c->start;
  int fresh = c->rules->guards.rate && c->admitted <= c->attempts; /* a token to ask for */
  if (!c->stopped && c->deadline > 0 && d->elapsed > lr_latest_start(c)) {
    /* asked late (a host's timer on a busy machine): no attempt past it,
     * nor one with less than LR_ATTEMPT_LEAST of it left */
    lr_chain_give_back(c);
    lr_call_stop_saying(c, d, LUARETRY_REASON_DEADLINE, "deadline",
                        "the deadline (%.*f s) %s before the attempt was asked for (%.*f s)",
                        lr_deadline_digits(c), c->deadline, lr_deadline_came(c, d->elapsed),
                        lr_deadline_digits(c), d->elapsed);
    lr_count_unattempted(c);
    lr_call_observe(c, NULL, d);
    return LUARETRY_OK;
  }
  if (!c->stopped && lr_chain_asks_going(c) && lr_chain_going(c, d)) return LUARETRY_OK;
  if (c->stopped) {
    d->retry = 0;
    d->reason = c->reason;
    d->rule = c->stop_rule;
    d->message = c->cold && c->cold->message && c->cold->message[0] ? c->cold->message : NULL;
    return LUARETRY_OK;
  }
  d->retry = 1;
  d->next_timeout = c->next_timeout;
  if (c->admit_at > d->elapsed) {
    /* the rate limiter's token comes then: wait for it, then attempt */
    d->wait = c->admit_at - d->elapsed;
    d->wait_source = LUARETRY_WAIT_RATE;
    if (fresh) lr_count(c->shared, LR_METRIC_COUNT, lr_clamp_ns(d->wait)); /* once per ask */
  }
  c->attempt_start = d->elapsed + d->wait; /* the attempt asked for begins then */
  if (c->deadline > 0) { /* what is left of the deadline then, asked late or not */
    double left = c->deadline - c->attempt_start;
    if (left < 1e-6) left = 1e-6; /* 0 would be no timeout */
    if (d->next_timeout == 0 || left < d->next_timeout) d->next_timeout = left;
  }
  c->next_timeout = d->next_timeout; /* luaretry_call_timeout's, and what propagate passes on */
  /* a wait the decision did not say (a rate token's, a pacing slot's):
   * told once, so that a log's waits add up to the call's */
  if (fresh && d->wait > 0) lr_call_observe(c, NULL, d);
  return LUARETRY_OK;
}

void luaretry_call_free(luaretry_call *c) {
  if (!lr_call_ok(c)) return;
  if (c->held && !c->stopped) lr_chain_give_back(c); /* decided, never sent */
  c->magic = 0;
  if (c->judge && c->judge->release) c->judge->release(c->judge->ud);
  lr_waiter_close(&c->waiter);
  if (c->cold) {
    free(c->cold->own);
    free(c->cold->message);
    free(c->cold->errmsg);
    free(c->cold->hook_error);
    free(c->cold->data.blob);
    free(c->cold->data.prepared);
    free(c->cold->data.headers);
    free(c->cold);
  }
  if (c->flight != &c->one) free(c->flight);
  free(c);
}

const char *luaretry_call_invocation_id(luaretry_call *c) {
  if (!lr_call_ok(c)) return "";
  lr_call_cold *cold = lr_call_cold_get(c); /* most calls never show it */
  if (!cold) return "";
  if (!cold->invocation_id[0]) {
    /* RFC 9562's version 4: the version nibble 4, the variant bits 10 */
    lr_rng id_rng; /* drawn when asked: the same bits as at the start */
    lr_rng_seed(&id_rng, c->invocation);
    uint64_t hi = lr_rng_next(&id_rng), lo = lr_rng_next(&id_rng);
    hi = (hi & ~0xf000ull) | 0x4000ull;
    lo = (lo & ~(3ull << 62)) | (2ull << 62);
    snprintf(cold->invocation_id, sizeof cold->invocation_id, "%08x-%04x-%04x-%04x-%012llx",
             (unsigned)(hi >> 32), (unsigned)(hi >> 16) & 0xffff, (unsigned)hi & 0xffff,
             (unsigned)(lo >> 48), (unsigned long long)(lo & 0xffffffffffffull));
  }
  return cold->invocation_id;
}

luaretry_code luaretry_call_is_idempotent(luaretry_call *c, const luaretry_request *r, int *yes) {
  if (!lr_call_ok(c)) return LUARETRY_E_ARG;
  if (!r || !yes)
    return lr_call_refuse_null(c, "luaretry_call_is_idempotent", !r ? "the request" : "idempotent");
  char *err = lr_call_buffer(LR_COLD_SLOT(c, errmsg));
  if (!err) return LUARETRY_E_NOMEM;
  lr_attempt_ctx ctx = lr_call_context(c, c->attempts + 1, luaretry_call_elapsed(c));
  return c->judge->is_idempotent(c->judge->ud, r, yes, &ctx, err, MESSAGE_SIZE);
}

luaretry_code luaretry_call_prepare(luaretry_call *c, const luaretry_request *in, int attempt,
                                    luaretry_request *out) {
  if (!lr_call_ok(c)) return LUARETRY_E_ARG;
  if (!in || !out) return lr_call_refuse_null(c, "luaretry_call_prepare", !in ? "in" : "out");
  char *err = lr_call_buffer(LR_COLD_SLOT(c, errmsg));
  if (!err) return LUARETRY_E_NOMEM;
  lr_attempt_ctx ctx = lr_call_context(c, attempt, luaretry_call_elapsed(c));
  return c->judge->prepare(c->judge->ud, in, attempt, out, &ctx, err, MESSAGE_SIZE);
}

double luaretry_call_timeout(const luaretry_call *c) { return lr_call_ok(c) ? c->next_timeout : 0; }

double luaretry_call_deadline(const luaretry_call *c) { return lr_call_ok(c) ? c->deadline : 0; }

double luaretry_call_connect_timeout(const luaretry_call *c) {
  if (!lr_call_ok(c)) return 0;
  double t = c->next_timeout, connect = c->rules->connect_timeout;
  return connect > 0 && (t == 0 || connect < t) ? connect : t;
}

void luaretry_call_stall(const luaretry_call *c, double *seconds, long *speed) {
  if (seconds) *seconds = lr_call_ok(c) ? c->rules->stall_timeout : 0;
  if (speed) *speed = lr_call_ok(c) ? c->rules->stall_speed : 0;
}

double luaretry_call_elapsed(const luaretry_call *c) {
  return lr_call_ok(c) ? lr_clock_now(&c->clock) - c->start : 0;
}

const char *luaretry_call_errmsg(const luaretry_call *c) {
  return !lr_call_ok(c) ? "no call" : c->cold && c->cold->errmsg ? c->cold->errmsg : "";
}

void lr_call_guard_origin(luaretry_call *c, double origin) {
  if (lr_call_ok(c) && c->clock.is_virtual) c->guard_origin = origin;
}

luaretry_code luaretry_call_errmsg_set(luaretry_call *c, luaretry_code code, const char *message) {
  if (!lr_call_ok(c)) return code;
  lr_call_say(LR_COLD_SLOT(c, errmsg), "%s", message ? message : "");
  return code;
}

void luaretry_call_cancel(luaretry_call *c) {
  if (lr_call_ok(c)) lr_waiter_cancel(&c->waiter);
}

int luaretry_call_wakeup_fd(luaretry_call *c) {
  return lr_call_ok(c) ? lr_waiter_fd(&c->waiter) : -1;
}

int luaretry_call_cancelled(const luaretry_call *c) {
  return lr_call_ok(c) ? atomic_load(&((luaretry_call *)c)->waiter.cancelled) : 0;
}

/* NaN, or +infinity on the virtual clock (which would stand there: every
 * elapsed, deadline and guard's time after it meaningless): refused.  Out
 * of line: a step's wait pays one comparison. */
static __attribute__((cold, noinline)) int wait_refused(luaretry_call *c, double seconds) {
  if (!isnan(seconds) && !c->clock.is_virtual) return 0; /* +infinity, real: until cancelled */
  lr_call_say(
    LR_COLD_SLOT(c, errmsg), "luaretry_call_wait: %s",
    isnan(seconds) ? "NaN seconds" : "a wait of +infinity on the virtual clock never ends");
  return 1;
}

luaretry_code luaretry_call_wait(luaretry_call *c, double seconds) {
  if (!lr_call_ok(c)) return LUARETRY_E_ARG;
  if (!(seconds < HUGE_VAL) && wait_refused(c, seconds)) return LUARETRY_E_ARG;
  /* a host that waits here waits anyway; read by the call's own steps, so
   * relaxed, and stored once (a locked store on every wait cost more than
   * the wait on the virtual clock) */
  if (!atomic_load_explicit(&c->waiter.blocking, memory_order_relaxed))
    atomic_store_explicit(&c->waiter.blocking, 1, memory_order_relaxed);
  return lr_wait(&c->clock, &c->waiter, seconds) ? LUARETRY_E_CANCELLED : LUARETRY_OK;
}

void luaretry_call_on_decision(luaretry_call *c, luaretry_observer_fn fn, void *ud) {
  if (!lr_call_ok(c)) return;
  lr_call_cold *cold = fn || c->cold ? lr_call_cold_get(c) : NULL;
  if (cold) cold->observer = fn, cold->observer_ud = ud;
}

/* The rule a request's stop names, as one of the call's own (static)
 * names: the request's decision lives no longer than its call. */
static const char *stop_rule(const luaretry_decision *r) {
  static const char *const RULES[] = { "rate",    "rate.headers", "admission", "deadline",
                                       "breaker", "budget",       "cancel" };
  for (size_t i = 0; r->rule && i < sizeof RULES / sizeof RULES[0]; i++)
    if (strcmp(r->rule, RULES[i]) == 0) return RULES[i];
  return luaretry_reason_name(r->reason);
}

luaretry_code luaretry_call_stop_as(luaretry_call *c, const luaretry_decision *request,
                                    luaretry_decision *d) {
  if (!lr_call_ok(c)) return LUARETRY_E_ARG;
  if (!request || !d)
    return lr_call_refuse_null(c, "luaretry_call_stop_as",
                               !request ? "the request's decision" : "d");
  lr_decision_clear(d); /* a refusal leaves nothing of an earlier decision, as a report's */
  /* the reason indexes the counters: one past the enum (a decision never
   * filled) is refused, named */
  if (request->retry || request->reason <= LUARETRY_REASON_NONE ||
      request->reason > LUARETRY_REASON_RATE_LIMIT) {
    lr_call_say(LR_COLD_SLOT(c, errmsg), "the request did not stop (retry %d, reason %d)",
                request->retry, (int)request->reason);
    return LUARETRY_E_ARG;
  }
  if (c->stopped) {
    lr_call_say(LR_COLD_SLOT(c, errmsg), "the call already stopped (%s)",
                luaretry_reason_name(c->reason));
    return LUARETRY_E_STATE;
  }
  d->attempt = c->started;
  d->elapsed = luaretry_call_elapsed(c);
  lr_chain_give_back(c);
  lr_call_stop_saying(c, d, request->reason, stop_rule(request), "a request of the workflow: %s",
                      request->message ? request->message : luaretry_reason_name(request->reason));
  lr_call_observe(c, NULL, d);
  return LUARETRY_OK;
}

void luaretry_call_stop_cancelled(luaretry_call *c, luaretry_decision *d) {
  if (!lr_call_ok(c) || !d) return;
  if (c->stopped) { /* stays as it stopped: a second stop would count it twice */
    lr_decision_clear(d);
    d->attempt = c->started;
    d->elapsed = luaretry_call_elapsed(c);
    d->reason = c->reason;
    d->rule = c->stop_rule;
    lr_call_say(LR_COLD_SLOT(c, errmsg), "the call already stopped (%s)",
                luaretry_reason_name(c->reason));
    return;
  }
  d->elapsed = luaretry_call_elapsed(c);
  d->message = NULL;
  d->hook_error = NULL;
  lr_chain_give_back(c); /* the attempt asked for never went */
  lr_call_stop(c, d, LUARETRY_REASON_CANCELLED, "cancel");
  lr_count_unattempted(c);
  lr_call_observe(c, NULL, d);
}
