/* call.c: the call state machine (attempts, deadline, verdicts, waits) and
 * the two layers on it: the step API and the blocking call.  It knows
 * nothing of HTTP or Lua: the policy's judge classifies, this file counts,
 * computes and decides. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

struct luaretry_call {
  lr_rules rules;        /* copied at begin: a reload does not move them */
  lr_judge judge;        /* one of the policy's Lua states, this call's own */
  lr_clock clock;
  lr_waiter waiter;
  lr_rng rng;
  double start;
  int attempts;          /* attempts reported so far */
  double previous;       /* decorrelated jitter's last wait */
  double next_timeout;
  int stopped;
  luaretry_reason reason;
  const char *stop_rule;
  luaretry_observer_fn observer;
  void *observer_ud;
  lr_shared *shared;     /* the policy's budget, breaker and counters */
  lr_shared own;         /* ... or this call's own, when isolated */
  char message[512];
  char errmsg[512];
};

void luaretry_outcome_init(luaretry_outcome *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->retry_after = -1;
}

void luaretry_request_init(luaretry_request *r) {
  if (r) memset(r, 0, sizeof *r);
}

void luaretry_call_options_init(luaretry_call_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
}

/* The timeout of an attempt starting `at` seconds into the call. */
static double timeout_at(const lr_rules *r, double at) {
  double t = r->attempt_timeout;
  if (r->deadline > 0) {
    double left = r->deadline - at;
    if (left < 0) left = 0;
    if (t == 0 || left < t) t = left;
  }
  return t;
}

static const int REASON_METRIC[] = {
  [LUARETRY_REASON_SUCCESS] = LR_M_SUCCESSES, [LUARETRY_REASON_FINAL] = LR_M_FINALS,
  [LUARETRY_REASON_EXHAUSTED] = LR_M_EXHAUSTED, [LUARETRY_REASON_DEADLINE] = LR_M_DEADLINE,
  [LUARETRY_REASON_POLICY_ERROR] = LR_M_POLICY_ERRORS,
  [LUARETRY_REASON_CANCELLED] = LR_M_CANCELLED, [LUARETRY_REASON_BUDGET] = LR_M_BUDGET,
  [LUARETRY_REASON_CIRCUIT_OPEN] = LR_M_CIRCUIT,
};

static void stop(luaretry_call *c, luaretry_decision *d, luaretry_reason r,
                 const char *rule);

luaretry_code lr_call_new(const lr_judge *j, const lr_rules *rules, lr_shared *shared,
                          const luaretry_call_options *o, luaretry_call **out) {
  *out = NULL;
  luaretry_call *c = calloc(1, sizeof *c);
  if (!c) {
    if (j->release) j->release(j->ud);
    return LUARETRY_E_NOMEM;
  }
  unsigned flags = o ? o->flags : 0;
  c->judge = *j;
  c->rules = *rules;
  c->clock.is_virtual = (flags & LUARETRY_CALL_VIRTUAL_TIME) != 0;
  lr_waiter_init(&c->waiter);
  if (flags & LUARETRY_CALL_SEED) lr_rng_seed(&c->rng, o->seed);
  else if (lr_rng_seed_os(&c->rng) != 0) {
    luaretry_call_free(c);
    return LUARETRY_E_SYSTEM;
  }
  c->start = lr_clock_now(&c->clock);
  c->previous = c->rules.backoff.initial;
  c->next_timeout = timeout_at(&c->rules, 0);
  if (!shared || (flags & LUARETRY_CALL_ISOLATED)) {
    /* a probe or a simulation: the policy's guards stay untouched */
    lr_shared_init(&c->own, &c->rules.guards);
    c->shared = &c->own;
  } else {
    c->shared = shared;
  }
  lr_count(c->shared, LR_M_CALLS, 1);
  if (!lr_breaker_admits(c->shared, 1)) {
    /* An open circuit: the call stops before it touches anything. */
    luaretry_decision d;
    memset(&d, 0, sizeof d);
    lr_fmt(c->message, sizeof c->message, "the circuit is open: calls fail fast "
           "for %.3f s after %d transient failures in a row", c->rules.guards.open_seconds,
           c->rules.guards.failures);
    stop(c, &d, LUARETRY_REASON_CIRCUIT_OPEN, "breaker");
  }
  *out = c;
  return LUARETRY_OK;
}

luaretry_code luaretry_call_next(luaretry_call *c, luaretry_decision *d) {
  if (!c || !d) return LUARETRY_E_ARG;
  memset(d, 0, sizeof *d);
  d->attempt = c->attempts;
  d->elapsed = luaretry_call_elapsed(c);
  if (!c->stopped && c->attempts > 0 && !lr_breaker_admits(c->shared, 0)) {
    /* the circuit opened while this call waited for its retry */
    lr_fmt(c->message, sizeof c->message, "the circuit opened while the call waited "
           "to retry (%d transient failures in a row)", c->rules.guards.failures);
    stop(c, d, LUARETRY_REASON_CIRCUIT_OPEN, "breaker");
    d->message = c->message;
    if (c->observer) c->observer(c->observer_ud, NULL, d);
  }
  if (c->stopped) {
    d->retry = 0;
    d->reason = c->reason;
    d->rule = c->stop_rule;
    d->message = c->message[0] ? c->message : NULL;
    return LUARETRY_OK;
  }
  d->retry = 1;
  d->next_timeout = c->next_timeout;
  return LUARETRY_OK;
}

void luaretry_call_free(luaretry_call *c) {
  if (!c) return;
  if (c->judge.release) c->judge.release(c->judge.ud);
  lr_waiter_close(&c->waiter);
  free(c);
}

luaretry_code luaretry_call_is_idempotent(luaretry_call *c, const luaretry_request *r,
                                          int *yes) {
  if (!c || !r || !yes) return LUARETRY_E_ARG;
  return c->judge.is_idempotent(c->judge.ud, r, yes, c->errmsg, sizeof c->errmsg);
}

luaretry_code luaretry_call_prepare(luaretry_call *c, const luaretry_request *in, int attempt,
                                    luaretry_request *out) {
  if (!c || !in || !out) return LUARETRY_E_ARG;
  return c->judge.prepare(c->judge.ud, in, attempt, out, c->errmsg, sizeof c->errmsg);
}

double luaretry_call_timeout(const luaretry_call *c) {
  return c ? c->next_timeout : 0;
}

double luaretry_call_elapsed(const luaretry_call *c) {
  return c ? lr_clock_now(&c->clock) - c->start : 0;
}

const char *luaretry_call_errmsg(const luaretry_call *c) {
  return c ? c->errmsg : "no call";
}

void luaretry_call_cancel(luaretry_call *c) {
  if (c) lr_waiter_cancel(&c->waiter);
}

int luaretry_call_wakeup_fd(luaretry_call *c) { return c ? lr_waiter_fd(&c->waiter) : -1; }

int luaretry_call_cancelled(const luaretry_call *c) {
  return c ? atomic_load(&((luaretry_call *)c)->waiter.cancelled) : 0;
}

luaretry_code luaretry_call_wait(luaretry_call *c, double seconds) {
  if (!c || isnan(seconds)) return LUARETRY_E_ARG;
  return lr_wait(&c->clock, &c->waiter, seconds) ? LUARETRY_E_CANCELLED
                                                 : LUARETRY_OK;
}

static void stop(luaretry_call *c, luaretry_decision *d, luaretry_reason r,
                 const char *rule) {
  c->stopped = 1;
  c->reason = r;
  c->stop_rule = rule;
  c->next_timeout = 0;
  d->retry = 0;
  d->reason = r;
  d->wait = 0;
  d->next_timeout = 0;
  d->wait_source = LUARETRY_WAIT_NONE;
  d->rule = rule;  /* static, or owned by the policy: no copy per decision */
  if (r != LUARETRY_REASON_NONE) lr_count(c->shared, REASON_METRIC[r], 1);
}

/* The wait a transient outcome earns before any server hint; 0 on success,
 * -1 on a policy error (message in v). */
static int backoff_wait(luaretry_call *c, const lr_verdict *v, double *w,
                        luaretry_wait_source *src, lr_verdict *err) {
  long n = c->attempts - 1;  /* retry n follows attempt n + 1 */
  if (v->wait >= 0) {
    *w = v->wait;
    *src = LUARETRY_WAIT_SCRIPT;
    return 0;
  }
  if (c->rules.backoff.kind == LUARETRY_BACKOFF_SCRIPT) {
    if (c->judge.backoff(c->judge.ud, n, c->previous, w, err) != 0) return -1;
    c->previous = *w;
    *src = LUARETRY_WAIT_BACKOFF;
    return 0;
  }
  int capped;
  *w = lr_backoff_wait(&c->rules.backoff, (uint64_t)n, &c->previous, &c->rng,
                       &capped);
  *src = capped ? LUARETRY_WAIT_CLAMPED : LUARETRY_WAIT_BACKOFF;
  return 0;
}

static luaretry_code report(luaretry_call *c, const luaretry_outcome *o,
                            const luaretry_class *forced,
                            luaretry_decision *d) {
  if (!c || !o || !d) return LUARETRY_E_ARG;
  memset(d, 0, sizeof *d);
  if (c->stopped) {
    lr_fmt(c->errmsg, sizeof c->errmsg,
             "the call already stopped (%s); begin a new one",
             luaretry_reason_name(c->reason));
    return LUARETRY_E_STATE;
  }
  const lr_rules *r = &c->rules;
  lr_count(c->shared, LR_M_ATTEMPTS, 1);
  d->attempt = ++c->attempts;
  d->elapsed = lr_clock_now(&c->clock) - c->start;
  c->message[0] = '\0';
  if (luaretry_call_cancelled(c)) {
    stop(c, d, LUARETRY_REASON_CANCELLED, "cancel");
    return LUARETRY_OK;
  }

  /* Field by field: zeroing the 512-byte message on every decision cost
   * more than the rest of the arithmetic. */
  lr_verdict v;
  v.cls = LUARETRY_CLASS_TRANSIENT;
  v.wait = -1;
  v.rule = "simulate";
  v.message[0] = '\0';
  if (forced) v.cls = *forced;
  else {
    lr_attempt_ctx ctx = { d->attempt, d->elapsed };
    c->judge.classify(c->judge.ud, o, &ctx, &v);
  }
  if (v.cls == LUARETRY_CLASS_SUCCESS) lr_guards_success(c->shared);
  else if (v.cls == LUARETRY_CLASS_TRANSIENT) lr_guards_failure(c->shared);
  else if (v.cls == LUARETRY_CLASS_FINAL) lr_guards_answered(c->shared);
  switch (v.cls) {
  case LUARETRY_CLASS_SUCCESS:
    stop(c, d, LUARETRY_REASON_SUCCESS, v.rule);
    return LUARETRY_OK;
  case LUARETRY_CLASS_FINAL:
    stop(c, d, LUARETRY_REASON_FINAL, v.rule);
    return LUARETRY_OK;
  case LUARETRY_CLASS_ERROR:
    lr_strlcpy(c->message, v.message, sizeof c->message);
    stop(c, d, LUARETRY_REASON_POLICY_ERROR, v.rule);
    d->message = c->message;
    return LUARETRY_OK;
  case LUARETRY_CLASS_TRANSIENT:
    if (o->not_repeatable) {
      lr_fmt(c->message, sizeof c->message, "transient, but %s%s is not idempotent "
             "and may have taken effect", o->method ? o->method : "the operation",
             o->method ? " request" : "");
      stop(c, d, LUARETRY_REASON_FINAL, "idempotency");
      d->message = c->message;
      return LUARETRY_OK;
    }
    break;
  }

  if (r->max_attempts > 0 && d->attempt >= r->max_attempts) {
    lr_fmt(c->message, sizeof c->message, "gave up after %d attempts over %.3f s",
           d->attempt, d->elapsed);
    stop(c, d, LUARETRY_REASON_EXHAUSTED, "max_attempts");
    d->message = c->message;
    return LUARETRY_OK;
  }
  if (!lr_budget_allows_retry(c->shared)) {
    lr_fmt(c->message, sizeof c->message, "the retry budget refuses: %.3f of %g tokens "
           "left, retries need more than half", lr_budget_tokens(c->shared),
           r->guards.max_tokens);
    stop(c, d, LUARETRY_REASON_BUDGET, "budget");
    d->message = c->message;
    return LUARETRY_OK;
  }
  if (!lr_breaker_admits(c->shared, 0)) {
    lr_fmt(c->message, sizeof c->message, "the circuit opened after %d transient "
           "failures in a row", r->guards.failures);
    stop(c, d, LUARETRY_REASON_CIRCUIT_OPEN, "breaker");
    d->message = c->message;
    return LUARETRY_OK;
  }
  double w;
  luaretry_wait_source src;
  lr_verdict err;
  err.cls = LUARETRY_CLASS_ERROR;
  err.wait = -1;
  err.rule = v.rule;
  err.message[0] = '\0';
  if (backoff_wait(c, &v, &w, &src, &err) != 0) {
    lr_strlcpy(c->message, err.message, sizeof c->message);
    stop(c, d, LUARETRY_REASON_POLICY_ERROR, err.rule);
    d->message = c->message;
    return LUARETRY_OK;
  }
  if (r->retry_after && o->retry_after >= 0 && isfinite(o->retry_after)) {
    if (o->retry_after > r->max_retry_after) {
      lr_fmt(c->message, sizeof c->message,
               "the server asked for %.3f s, more than max_retry_after (%.3f s)",
               o->retry_after, r->max_retry_after);
      stop(c, d, LUARETRY_REASON_DEADLINE, "max_retry_after");
      d->message = c->message;
      return LUARETRY_OK;
    }
    /* Clients told the same instant must not all return at it: spread
     * upward by the policy's jitter, never earlier than asked. */
    double spread = r->backoff.jitter == LUARETRY_JITTER_NONE
                        ? 0 : lr_rng_uniform(&c->rng, 0, r->backoff.jitter_max);
    if (o->retry_after + spread > w) {
      w = o->retry_after + spread;
      src = LUARETRY_WAIT_SERVER;
    }
  }
  if (r->deadline > 0 && d->elapsed + w >= r->deadline) {
    lr_fmt(c->message, sizeof c->message,
             "the next attempt would start at %.3f s, past the deadline (%.3f s)",
             d->elapsed + w, r->deadline);
    stop(c, d, LUARETRY_REASON_DEADLINE,
         src == LUARETRY_WAIT_SERVER ? "retry_after" : "deadline");
    d->message = c->message;
    return LUARETRY_OK;
  }
  d->retry = 1;
  d->reason = LUARETRY_REASON_NONE;
  d->wait = w;
  lr_count(c->shared, LR_M_RETRIES, 1);
  atomic_fetch_add_explicit(&c->shared->waited_ns, (long long)(w * 1e9), memory_order_relaxed);
  d->wait_source = src;
  d->next_timeout = c->next_timeout = timeout_at(r, d->elapsed + w);
  d->rule = v.rule;
  if (c->judge.on_retry) d->hook_error = c->judge.on_retry(c->judge.ud, o, d);
  return LUARETRY_OK;
}

static luaretry_code observed(luaretry_call *c, const luaretry_outcome *o,
                              luaretry_decision *d, luaretry_code rc) {
  if (rc == LUARETRY_OK && c->observer) c->observer(c->observer_ud, o, d);
  return rc;
}

luaretry_code luaretry_call_report(luaretry_call *c, const luaretry_outcome *o,
                                   luaretry_decision *d) {
  return observed(c, o, d, report(c, o, NULL, d));
}

luaretry_code lr_call_report_class(luaretry_call *c, const luaretry_outcome *o,
                                   luaretry_class forced,
                                   luaretry_decision *d) {
  return observed(c, o, d, report(c, o, &forced, d));
}

void luaretry_call_observe(luaretry_call *c, luaretry_observer_fn fn, void *ud) {
  if (!c) return;
  c->observer = fn;
  c->observer_ud = ud;
}

void luaretry_call_stop_cancelled(luaretry_call *c, luaretry_decision *d) {
  if (!c || !d) return;
  d->elapsed = luaretry_call_elapsed(c);
  d->message = NULL;
  d->hook_error = NULL;
  stop(c, d, LUARETRY_REASON_CANCELLED, "cancel");
  if (c->observer) c->observer(c->observer_ud, NULL, d);
}

luaretry_code luaretry_call_run(luaretry_call *c, luaretry_operation_fn op,
                                void *ud, luaretry_decision *final) {
  if (!c || !op || !final) return LUARETRY_E_ARG;
  memset(final, 0, sizeof *final);
  if (c->stopped) {
    /* refused at begin (circuit open): a decision, not a misuse */
    if (c->attempts == 0) return luaretry_call_next(c, final);
    return LUARETRY_E_STATE;
  }
  for (;;) {
    luaretry_outcome o;
    luaretry_outcome_init(&o);
    luaretry_code rc = op(ud, c, c->attempts + 1, c->next_timeout, &o);
    if (rc != LUARETRY_OK) {
      final->attempt = c->attempts + 1;
      luaretry_call_stop_cancelled(c, final);
      lr_fmt(c->errmsg, sizeof c->errmsg, "attempt %d: the operation gave up: %s",
               final->attempt, luaretry_strerror(rc));
      return rc;
    }
    rc = luaretry_call_report(c, &o, final);
    if (rc != LUARETRY_OK || !final->retry) return rc;
    if (lr_wait(&c->clock, &c->waiter, final->wait)) {
      luaretry_call_stop_cancelled(c, final);
      return LUARETRY_OK;
    }
    rc = luaretry_call_next(c, final);  /* the breaker may have opened meanwhile */
    if (rc != LUARETRY_OK || !final->retry) return rc;
  }
}
