/* call.c: the call state machine (attempts, deadline, verdicts, waits) and
 * the two layers on it: the step API and the blocking call.  It knows
 * nothing of HTTP or Lua: the policy's judge classifies, this file counts,
 * computes and decides.  A call in flight is this struct and nothing more:
 * its rules and judge belong to the policy's load it began under. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

#define MESSAGE_SIZE 512

/* An attempt in flight: its number, start and kind. */
#define LR_FLIGHT_MAX 11 /* the attempt, and hedge.max (at most 10) hedges */
typedef struct {
  int id;
  int hedge;
  double start;
} lr_flight;

struct luaretry_call {
  const lr_rules *rules; /* the load's: a reload does not move them */
  const lr_judge *judge;
  lr_shared *shared;       /* the policy's budget, breaker and counters */
  lr_shared *own;          /* ... or this call's own, when isolated */
  const lr_remote *remote; /* asked first (the fleet), or NULL */
  long max_attempts;       /* the rules', or a simulation's */
  lr_clock clock;
  lr_waiter waiter;
  lr_rng rng;
  double start;
  double guard_origin;      /* added to the clock for the guards */
  double previous;          /* decorrelated jitter's last wait */
  double throttle_previous; /* ... and the throttling backoff's */
  double attempt_start;     /* seconds into the call the attempt began (the
                              breaker's slow-call rule) */
  double admit_at;          /* seconds into the call the next attempt's token
                              comes (the rate limiter) */
  int admitted;             /* attempts that hold a token: the next has one
                              when admitted > attempts */
  double next_timeout;
  int attempts; /* attempts reported so far */
  int stopped;
  luaretry_reason reason;
  const char *stop_rule;
  luaretry_observer_fn observer;
  void *observer_ud;
  lr_call_data data;      /* the script side's, between decisions */
  uint64_t invocation[2]; /* the invocation id's bits, drawn at the start */
  char invocation_id[37]; /* ... and its text, made on first use */
  /* made on first use: most calls never need them */
  char *message;    /* why the call stopped, for the decision */
  char *errmsg;     /* luaretry_call_errmsg */
  char *hook_error; /* on_retry's error, for the decision */
  /* hedging: the attempts in flight, for a host that runs several at once
   * (luaretry_call_start, luaretry_call_hedge, luaretry_call_report_attempt) */
  int started; /* attempts started (or reported unannounced) */
  int in_flight, hedges_in_flight;
  int hedge_closed;   /* no more hedges until the next attempt starts */
  int no_hedge;       /* LUARETRY_CALL_NO_HEDGE */
  double hedge_delay; /* this round's, fixed when its attempt started */
  double last_start;  /* the latest start in flight, call seconds */
  lr_flight one;      /* the attempt in flight ... */
  lr_flight *flight;  /* ... here, or LR_FLIGHT_MAX made at the first
                               hedge: most calls never hedge */
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
  if (o) memset(o, 0, sizeof *o);
}

/* One of the call's message buffers, made on first use; NULL when out of
 * memory (the message is then left out, never the decision). */
static char *buffer(char **slot) {
  if (!*slot) *slot = malloc(MESSAGE_SIZE);
  return *slot;
}

static const char *say(char **slot, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *say(char **slot, const char *fmt, ...) {
  char *b = buffer(slot);
  if (!b) return NULL;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b, MESSAGE_SIZE, fmt, ap);
  va_end(ap);
  return b;
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
  [LUARETRY_REASON_SUCCESS] = LR_M_SUCCESSES,
  [LUARETRY_REASON_FINAL] = LR_M_FINALS,
  [LUARETRY_REASON_EXHAUSTED] = LR_M_EXHAUSTED,
  [LUARETRY_REASON_DEADLINE] = LR_M_DEADLINE,
  [LUARETRY_REASON_POLICY_ERROR] = LR_M_POLICY_ERRORS,
  [LUARETRY_REASON_CANCELLED] = LR_M_CANCELLED,
  [LUARETRY_REASON_BUDGET] = LR_M_BUDGET,
  [LUARETRY_REASON_CIRCUIT_OPEN] = LR_M_CIRCUIT,
  [LUARETRY_REASON_GAVE_UP] = LR_M_GAVE_UP,
  [LUARETRY_REASON_SERVER_WAIT_TOO_LONG] = LR_M_SERVER_WAIT,
  [LUARETRY_REASON_THROTTLE] = LR_M_THROTTLE_STOPS,
  [LUARETRY_REASON_RATE_LIMIT] = LR_M_RATE_STOPS,
};

static void stop(luaretry_call *c, luaretry_decision *d, luaretry_reason r, const char *rule) {
  c->stopped = 1;
  c->reason = r;
  c->stop_rule = rule;
  c->next_timeout = 0;
  d->retry = 0;
  d->reason = r;
  d->wait = 0;
  d->next_timeout = 0;
  d->wait_source = LUARETRY_WAIT_NONE;
  d->rule = rule; /* static, or owned by the policy: no copy per decision */
  if (r != LUARETRY_REASON_NONE) lr_count(c->shared, REASON_METRIC[r], 1);
  /* the attempts still in flight are the host's to cancel now */
  d->in_flight = c->in_flight;
  if (c->in_flight) lr_count(c->shared, LR_M_HEDGES_CANCELLED, c->in_flight);
  c->in_flight = c->hedges_in_flight = 0;
}

/* Stops the call for reason r with a message saying why. */
static void stop_saying(luaretry_call *c, luaretry_decision *d, luaretry_reason r, const char *rule,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void stop_saying(luaretry_call *c, luaretry_decision *d, luaretry_reason r, const char *rule,
                        const char *fmt, ...) {
  char *b = buffer(&c->message);
  if (b) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, MESSAGE_SIZE, fmt, ap);
    va_end(ap);
  }
  stop(c, d, r, rule);
  d->message = b;
}

/* ---- the guards: the remote view first (the fleet), the local guards
 * when it does not know.  `now` is the call's clock; the local guards see
 * it from guard_origin.  *remote says who answered, for the message. */

static int budget_allows(luaretry_call *c, double now, int *remote) {
  *remote = 0;
  if (c->remote) {
    int v = c->remote->ops->budget_allows_retry(c->remote->ud, now);
    if (v != LR_REMOTE_LOCAL) return *remote = 1, v;
  }
  return lr_budget_allows_retry(c->shared, &c->rules->guards);
}

static int breaker_admits(luaretry_call *c, int first_attempt, double now, int *remote) {
  *remote = 0;
  if (c->remote) {
    double d = c->rules->deadline, left = d > 0 ? d - (now - c->start) : 0;
    if (d > 0 && left <= 0) left = 1e-9; /* no time: no round trip (0 is no deadline) */
    int v = c->remote->ops->breaker_admits(c->remote->ud, first_attempt, now, left, &c->waiter);
    if (v != LR_REMOTE_LOCAL) return *remote = 1, v;
  }
  return lr_breaker_admits(c->shared, &c->rules->guards, first_attempt, c->guard_origin + now);
}

static double budget_tokens(luaretry_call *c, int remote) {
  return remote ? c->remote->ops->tokens(c->remote->ud) : lr_budget_tokens(c->shared);
}

/* Nanoseconds for the counters, clamped: a 1e300 s wait still counts. */
static long long clamp_ns(double seconds) {
  return seconds >= 9.2e9 ? (long long)9.2e18 : seconds > 0 ? (long long)(seconds * 1e9) : 0;
}

/* In a breaker's message: the rate rules, when it has them. */
static const char *rate_note(const lr_guards *g) {
  return lr_breaker_rated(g) ? ", or a failure or slow-call rate over its window" : "";
}

/* ---- client-side throttling and the rate limiter (pace.c), on the
 * guard clock: `at` is the call's clock */

static int throttle_refuses(luaretry_call *c, double at) {
  const lr_guards *g = &c->rules->guards;
  return g->throttle_k > 0 &&
         !lr_throttle_admits(c->shared, g, c->guard_origin + at, lr_rng_unit(&c->rng));
}

static void stop_throttled(luaretry_call *c, luaretry_decision *d, double at) {
  const lr_guards *g = &c->rules->guards;
  stop_saying(c, d, LUARETRY_REASON_THROTTLE, "throttle",
              "the client-side throttle refuses "
              "(it refuses %.0f%% of attempts now: fewer than 1 in %g was accepted over "
              "%g s)",
              100 * lr_throttle_refusal(c->shared, g, c->guard_origin + at), g->throttle_k,
              g->throttle_window);
}

/* A token for the attempt that would start `start` seconds into the call:
 * the extra wait, or -1 when it would come past the deadline (nothing
 * reserved then).  An adaptive limiter may hand out a time to ask again
 * instead (admitted stays, and luaretry_call_next asks then). */
static double rate_token(luaretry_call *c, double start) {
  const lr_rules *r = c->rules;
  double base = c->guard_origin + c->start;
  double latest = r->deadline > 0 ? base + r->deadline : -1;
  int held;
  double extra = lr_rate_reserve(c->shared, &r->guards, base + start, latest,
                                 r->guards.rate_adaptive ? lr_rng_unit(&c->rng) : 0, &held);
  if (extra >= 0) {
    c->admitted = held ? c->attempts + 1 : c->attempts; /* not held: ask again then */
    c->admit_at = start + extra;
  }
  return extra;
}

static void stop_rate_limited(luaretry_call *c, luaretry_decision *d, double start) {
  stop_saying(c, d, LUARETRY_REASON_RATE_LIMIT, "rate",
              "the rate limiter's next token "
              "(%.3f per second now) comes after the deadline (%.3f s; the attempt would "
              "start at %.3f s or later)",
              lr_rate_now(c->shared, &c->rules->guards), c->rules->deadline, start);
}

/* In a refusal's message: whose counts decided. */
static const char *whose(int remote) { return remote ? "the fleet's " : "the "; }

/* After a probe permit's round trip (lr_call_new): the first attempt has
 * what is left of the deadline, or the call stops if nothing is. */
static void started_late(luaretry_call *c) {
  double elapsed = lr_clock_now(&c->clock) - c->start;
  if (elapsed < c->rules->deadline) {
    double t = timeout_at(c->rules, elapsed);
    if (t < c->next_timeout) c->next_timeout = t;
    return;
  }
  luaretry_decision d;
  memset(&d, 0, sizeof d);
  stop_saying(c, &d, LUARETRY_REASON_DEADLINE, "deadline",
              "the deadline (%.3f s) passed "
              "while the fleet was asked for a probe permit",
              c->rules->deadline);
  lr_count(c->shared, LR_M_UNATTEMPTED, 1);
}

/* A call the guards refuse before its first attempt (an open circuit, the
 * client-side throttle) stops before it touches anything. */
static void refused_at_begin(luaretry_call *c) {
  const lr_rules *rules = c->rules;
  int remote_said;
  if (rules->guards.breaker && !breaker_admits(c, 1, c->start, &remote_said)) {
    /* An open circuit: the call stops before it touches anything. */
    luaretry_decision d;
    memset(&d, 0, sizeof d);
    stop_saying(c, &d, LUARETRY_REASON_CIRCUIT_OPEN, "breaker",
                "%scircuit is open: "
                "calls fail fast for %.3f s after %d transient failures in a row%s",
                whose(remote_said), rules->guards.open_seconds, rules->guards.failures,
                rate_note(&rules->guards));
    lr_count(c->shared, LR_M_UNATTEMPTED, 1);
  } else if (throttle_refuses(c, c->start)) {
    luaretry_decision d;
    memset(&d, 0, sizeof d);
    stop_throttled(c, &d, c->start);
    lr_count(c->shared, LR_M_UNATTEMPTED, 1);
  }
}

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
  c->judge = j;
  c->rules = rules;
  c->max_attempts = max_attempts > 0 ? max_attempts : rules->max_attempts;
  c->clock.is_virtual = (flags & LUARETRY_CALL_VIRTUAL_TIME) != 0;
  c->no_hedge = (flags & LUARETRY_CALL_NO_HEDGE) != 0;
  /* The guards see a virtual clock from the real time at its start: calls
   * begun apart stay apart, so they share a breaker sensibly. */
  if (c->clock.is_virtual) c->guard_origin = lr_monotonic_now();
  lr_waiter_init(&c->waiter);
  c->shared = shared;
  c->remote = remote && remote->ops ? remote : NULL;
  if ((flags & LUARETRY_CALL_ISOLATED) || !shared) {
    /* a probe or a simulation: the policy's guards stay untouched */
    c->own = lr_aligned_calloc(sizeof *c->own);
    if (c->own) lr_shared_init(c->own, &rules->guards);
    c->shared = c->own;
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
  lr_rng id_rng;
  lr_rng_seed(&id_rng, c->rng.s[0] ^ c->rng.s[3] ^ 0x6c72696e766f6b65ull);
  c->invocation[0] = lr_rng_next(&id_rng);
  c->invocation[1] = lr_rng_next(&id_rng);
  c->start = lr_clock_now(&c->clock);
  c->previous = rules->backoff.initial;
  c->throttle_previous = rules->throttle_backoff.initial;
  c->next_timeout = timeout_at(rules, 0);
  lr_count(c->shared, LR_M_CALLS, 1);
  refused_at_begin(c);
  if (!c->stopped && c->remote && rules->deadline > 0) started_late(c);
  *out = c;
  return LUARETRY_OK;
}

/* The remote view brought up to date, within what is left of the
 * deadline; a cancel ends the round trip at once.  The attempt's timeout
 * is what is left after it.  1 when the call stopped (d filled). */
static int refresh_remote(luaretry_call *c, double *now, luaretry_decision *d) {
  const lr_rules *r = c->rules;
  double left = r->deadline > 0 ? r->deadline - (*now - c->start) : 0;
  if (r->deadline <= 0 || left > 0) c->remote->ops->refresh(c->remote->ud, *now, left, &c->waiter);
  *now = lr_clock_now(&c->clock);
  double elapsed = *now - c->start;
  if (atomic_load(&c->waiter.cancelled)) {
    stop(c, d, LUARETRY_REASON_CANCELLED, "cancel");
    return 1;
  }
  if (r->deadline > 0 && elapsed >= r->deadline) {
    stop_saying(c, d, LUARETRY_REASON_DEADLINE, "deadline",
                "the deadline (%.3f s) passed "
                "while the fleet's counts were brought up to date",
                r->deadline);
    return 1;
  }
  double t = timeout_at(r, elapsed);
  if (r->deadline > 0 && t < c->next_timeout) c->next_timeout = t;
  return 0;
}

/* Before a retry, after its wait: the guards are asked again, so a retry
 * decided on counts that were stale is not made once the circuit opened or
 * (with the fleet's counts, brought up to date here) the fleet's budget
 * is spent.  The local budget is not asked again: its counts were current
 * when the retry was decided.  1 when the call stopped (d filled). */
static int refused_after_wait(luaretry_call *c, luaretry_decision *d) {
  const lr_guards *g = &c->rules->guards;
  if (!g->budget && !g->breaker) return 0;
  double now = lr_clock_now(&c->clock);
  int remote_said = 0;
  if (c->remote && refresh_remote(c, &now, d)) {
    /* stopped: the deadline passed, or the call was cancelled */
  } else if (g->breaker && !breaker_admits(c, 0, now, &remote_said)) {
    stop_saying(c, d, LUARETRY_REASON_CIRCUIT_OPEN, "breaker",
                "%scircuit opened while "
                "the call waited to retry (%d transient failures in a row%s)",
                whose(remote_said), g->failures, rate_note(g));
  } else if (g->budget && c->remote &&
             c->remote->ops->budget_allows_retry(c->remote->ud, now) == 0) {
    stop_saying(c, d, LUARETRY_REASON_BUDGET, "budget",
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

luaretry_code luaretry_call_next(luaretry_call *c, luaretry_decision *d) {
  if (!c || !d) return LUARETRY_E_ARG;
  memset(d, 0, sizeof *d);
  d->attempt = c->started; /* hedges that were cancelled were started too */
  d->elapsed = luaretry_call_elapsed(c);
  if (!c->stopped && c->attempts > 0) refused_after_wait(c, d);
  if (c->stopped) {
    d->retry = 0;
    d->reason = c->reason;
    d->rule = c->stop_rule;
    d->message = c->message && c->message[0] ? c->message : NULL;
    return LUARETRY_OK;
  }
  int fresh = c->rules->guards.rate && c->admitted <= c->attempts; /* a token to ask for */
  if (fresh && rate_token(c, d->elapsed) < 0) {
    stop_rate_limited(c, d, d->elapsed);
    lr_count(c->shared, LR_M_UNATTEMPTED, 1);
    if (c->observer) c->observer(c->observer_ud, NULL, d);
    return LUARETRY_OK;
  }
  d->retry = 1;
  d->next_timeout = c->next_timeout;
  if (c->admit_at > d->elapsed) {
    /* the rate limiter's token comes then: wait for it, then attempt */
    d->wait = c->admit_at - d->elapsed;
    d->wait_source = LUARETRY_WAIT_RATE;
    if (fresh) lr_count(c->shared, LR_METRIC_COUNT, clamp_ns(d->wait)); /* once per ask */
  }
  c->attempt_start = d->elapsed + d->wait; /* the attempt asked for begins then */
  return LUARETRY_OK;
}

void luaretry_call_free(luaretry_call *c) {
  if (!c) return;
  if (c->judge && c->judge->release) c->judge->release(c->judge->ud);
  lr_waiter_close(&c->waiter);
  free(c->own);
  free(c->data.blob);
  free(c->data.prepared);
  free(c->data.headers);
  free(c->message);
  free(c->errmsg);
  free(c->hook_error);
  if (c->flight != &c->one) free(c->flight);
  free(c);
}

static lr_attempt_ctx context(luaretry_call *c, int attempt, double elapsed) {
  lr_attempt_ctx ctx = { attempt, elapsed, &c->rng, &c->data, 0, c };
  return ctx;
}

const char *luaretry_call_invocation_id(luaretry_call *c) {
  if (!c) return "";
  if (!c->invocation_id[0]) {
    /* RFC 9562's version 4: the version nibble 4, the variant bits 10 */
    uint64_t hi = (c->invocation[0] & ~0xf000ull) | 0x4000ull;
    uint64_t lo = (c->invocation[1] & ~(3ull << 62)) | (2ull << 62);
    snprintf(c->invocation_id, sizeof c->invocation_id, "%08x-%04x-%04x-%04x-%012llx",
             (unsigned)(hi >> 32), (unsigned)(hi >> 16) & 0xffff, (unsigned)hi & 0xffff,
             (unsigned)(lo >> 48), (unsigned long long)(lo & 0xffffffffffffull));
  }
  return c->invocation_id;
}

luaretry_code luaretry_call_is_idempotent(luaretry_call *c, const luaretry_request *r, int *yes) {
  if (!c || !r || !yes) return LUARETRY_E_ARG;
  char *err = buffer(&c->errmsg);
  if (!err) return LUARETRY_E_NOMEM;
  lr_attempt_ctx ctx = context(c, c->attempts + 1, luaretry_call_elapsed(c));
  return c->judge->is_idempotent(c->judge->ud, r, yes, &ctx, err, MESSAGE_SIZE);
}

luaretry_code luaretry_call_prepare(luaretry_call *c, const luaretry_request *in, int attempt,
                                    luaretry_request *out) {
  if (!c || !in || !out) return LUARETRY_E_ARG;
  char *err = buffer(&c->errmsg);
  if (!err) return LUARETRY_E_NOMEM;
  lr_attempt_ctx ctx = context(c, attempt, luaretry_call_elapsed(c));
  return c->judge->prepare(c->judge->ud, in, attempt, out, &ctx, err, MESSAGE_SIZE);
}

double luaretry_call_timeout(const luaretry_call *c) { return c ? c->next_timeout : 0; }

double luaretry_call_connect_timeout(const luaretry_call *c) {
  if (!c) return 0;
  double t = c->next_timeout, connect = c->rules->connect_timeout;
  return connect > 0 && (t == 0 || connect < t) ? connect : t;
}

void luaretry_call_stall(const luaretry_call *c, double *seconds, long *speed) {
  if (seconds) *seconds = c ? c->rules->stall_timeout : 0;
  if (speed) *speed = c ? c->rules->stall_speed : 0;
}

double luaretry_call_elapsed(const luaretry_call *c) {
  return c ? lr_clock_now(&c->clock) - c->start : 0;
}

const char *luaretry_call_errmsg(const luaretry_call *c) {
  return !c ? "no call" : c->errmsg ? c->errmsg : "";
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
  return lr_wait(&c->clock, &c->waiter, seconds) ? LUARETRY_E_CANCELLED : LUARETRY_OK;
}

/* The policy's jitter over a server's (or a script's) wait: uniform in
 * [0, jitter_max] for every kind but none. */
static double spread(luaretry_call *c) {
  const lr_backoff *b = &c->rules->backoff;
  return b->jitter == LUARETRY_JITTER_NONE ? 0 : lr_rng_uniform(&c->rng, 0, b->jitter_max);
}

/* The wait a transient outcome earns before any server hint; 0 on success,
 * -1 on a policy error (message in err). */
static int backoff_wait(luaretry_call *c, const lr_verdict *v, const lr_attempt_ctx *ctx, double *w,
                        luaretry_wait_source *src, lr_verdict *err) {
  long n = c->attempts - 1; /* retry n follows attempt n + 1 */
  if (v->wait >= 0 && !v->server) {
    *w = v->wait + (v->jitter ? spread(c) : 0);
    *src = LUARETRY_WAIT_SCRIPT;
    return 0;
  }
  int capped;
  if (v->throttled) { /* the throttling backoff, whatever the policy's backoff is */
    *w = lr_backoff_wait(&c->rules->throttle_backoff, (uint64_t)n, &c->throttle_previous, &c->rng,
                         &capped);
    *src = capped ? LUARETRY_WAIT_CLAMPED : LUARETRY_WAIT_THROTTLE;
    return 0;
  }
  if (c->rules->backoff.kind == LUARETRY_BACKOFF_SCRIPT) {
    if (c->judge->backoff(c->judge->ud, ctx, n, c->previous, w, err) != 0) return -1;
    c->previous = *w;
    *src = LUARETRY_WAIT_BACKOFF;
    return 0;
  }
  *w = lr_backoff_wait(&c->rules->backoff, (uint64_t)n, &c->previous, &c->rng, &capped);
  *src = capped ? LUARETRY_WAIT_CLAMPED : LUARETRY_WAIT_BACKOFF;
  return 0;
}

/* The verdict's effect on the guards; 1 when the verdict ends the call
 * (d filled), 0 when a transient outcome may be retried. */
static int judged(luaretry_call *c, const luaretry_outcome *o, const lr_verdict *v, double now,
                  luaretry_decision *d) {
  const lr_guards *g = &c->rules->guards;
  int guarded = g->budget || g->breaker;
  double guard_now = c->guard_origin + now;
  if (v->cls != LUARETRY_CLASS_ERROR && lr_breaker_rated(g)) {
    int failed = v->cls == LUARETRY_CLASS_TRANSIENT && !v->throttled;
    int slow = g->slow_seconds > 0 && d->elapsed - c->attempt_start >= g->slow_seconds;
    lr_breaker_record(c->shared, g, failed, slow, guard_now);
  }
  if (v->cls != LUARETRY_CLASS_ERROR) {
    lr_throttle_record(c->shared, g, v->cls != LUARETRY_CLASS_TRANSIENT, guard_now);
    if (v->cls == LUARETRY_CLASS_SUCCESS || v->throttled)
      lr_rate_answer(c->shared, g, v->throttled, guard_now);
  }
  switch (v->cls) {
  case LUARETRY_CLASS_SUCCESS:
    if (guarded) lr_guards_success(c->shared, g, guard_now);
    if (guarded && c->remote) c->remote->ops->record(c->remote->ud, LR_REMOTE_SUCCESS, now);
    stop(c, d, LUARETRY_REASON_SUCCESS, v->rule);
    return 1;
  case LUARETRY_CLASS_FINAL:
    if (guarded) lr_guards_answered(c->shared, g, guard_now);
    if (guarded && c->remote) c->remote->ops->record(c->remote->ud, LR_REMOTE_ANSWERED, now);
    if (v->reason)
      stop_saying(c, d, LUARETRY_REASON_FINAL, v->rule, "%s", v->message);
    else
      stop(c, d, LUARETRY_REASON_FINAL, v->rule);
    return 1;
  case LUARETRY_CLASS_TRANSIENT:
    if (v->throttled) {
      lr_count(c->shared, LR_M_THROTTLED, 1);
      d->throttled = 1;
      if (guarded) lr_guards_throttled(c->shared, g, guard_now);
    } else if (guarded) {
      lr_guards_failure(c->shared, g, guard_now);
    }
    if (guarded && c->remote) c->remote->ops->record(c->remote->ud, LR_REMOTE_FAILURE, now);
    if (!o->not_repeatable) return 0;
    stop_saying(c, d, LUARETRY_REASON_FINAL, "idempotency",
                "transient, but %s%s is not "
                "idempotent and may have taken effect",
                o->method ? o->method : "the operation", o->method ? " request" : "");
    return 1;
  case LUARETRY_CLASS_ERROR:
  case LUARETRY_CLASS_THROTTLING: /* the judge never says it */ break;
  }
  stop_saying(c, d, LUARETRY_REASON_POLICY_ERROR, v->rule, "%s", v->message);
  return 1;
}

/* The limits that end a call before its wait: attempts, budget, breaker;
 * 1 when one did (d filled). */
static int limited(luaretry_call *c, double now, luaretry_decision *d) {
  const lr_guards *g = &c->rules->guards;
  if (c->max_attempts > 0 && c->started >= c->max_attempts) {
    stop_saying(c, d, LUARETRY_REASON_EXHAUSTED, "max_attempts",
                "gave up after %d attempts over %.3f s", c->started, d->elapsed);
    return 1;
  }
  int remote_said;
  if (g->budget && !budget_allows(c, now, &remote_said)) {
    stop_saying(c, d, LUARETRY_REASON_BUDGET, "budget",
                "%sretry budget refuses: %.3f of "
                "%g tokens left, retries need more than half",
                whose(remote_said), budget_tokens(c, remote_said), g->max_tokens);
    return 1;
  }
  if (g->breaker && !breaker_admits(c, 0, now, &remote_said)) {
    stop_saying(c, d, LUARETRY_REASON_CIRCUIT_OPEN, "breaker",
                "%scircuit opened after %d "
                "transient failures in a row%s",
                whose(remote_said), g->failures, rate_note(g));
    return 1;
  }
  if (throttle_refuses(c, now)) {
    stop_throttled(c, d, now);
    return 1;
  }
  return 0;
}

/* A server's Retry-After (or a wait the script read from the server, such
 * as a rate-limit reset) over the wait w: never earlier than asked, and
 * spread upward by the policy's jitter (clients told the same instant must
 * not all come back at it).  Of both, the longer counts.  1 when it ends
 * the call instead (d filled). */
static int server_wait(luaretry_call *c, const luaretry_outcome *o, const lr_verdict *v, double *w,
                       luaretry_wait_source *src, luaretry_decision *d) {
  const lr_rules *r = c->rules;
  if (!r->retry_after) return 0;
  double asked = o->retry_after >= 0 && isfinite(o->retry_after) ? o->retry_after : -1;
  if (v->server && v->wait > asked) asked = v->wait;
  if (asked < 0) return 0;
  if (asked > r->max_retry_after) {
    stop_saying(c, d, LUARETRY_REASON_SERVER_WAIT_TOO_LONG, "max_retry_after",
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

/* A transient outcome the guards let through: the wait (backoff, or the
 * server's or the script's), then a retry, or a stop when that wait would
 * pass the deadline or the server asks too much. */
static void retry_or_stop(luaretry_call *c, const luaretry_outcome *o, const lr_verdict *v,
                          const lr_attempt_ctx *ctx, luaretry_decision *d) {
  const lr_rules *r = c->rules;
  double w;
  luaretry_wait_source src;
  lr_verdict err;
  err.cls = LUARETRY_CLASS_ERROR;
  err.wait = -1;
  err.jitter = err.server = err.reason = 0;
  err.rule = v->rule;
  err.message[0] = '\0';
  if (backoff_wait(c, v, ctx, &w, &src, &err) != 0) {
    stop_saying(c, d, LUARETRY_REASON_POLICY_ERROR, err.rule, "%s", err.message);
    return;
  }
  if (server_wait(c, o, v, &w, &src, d)) return;
  if (r->guards.rate) {
    double extra = rate_token(c, d->elapsed + w);
    if (extra < 0) {
      stop_rate_limited(c, d, d->elapsed + w);
      return;
    }
    if (extra > 0) w += extra, src = LUARETRY_WAIT_RATE;
  }
  if (r->deadline > 0 && d->elapsed + w >= r->deadline) {
    stop_saying(c, d, LUARETRY_REASON_DEADLINE,
                src == LUARETRY_WAIT_SERVER ? "retry_after" : "deadline",
                "the next attempt would start at %.3f s, past the deadline (%.3f s)",
                d->elapsed + w, r->deadline);
    return;
  }
  d->retry = 1;
  d->reason = LUARETRY_REASON_NONE;
  d->wait = w;
  lr_count(c->shared, LR_M_RETRIES, 1);
  lr_count(c->shared, LR_METRIC_COUNT, clamp_ns(w));
  d->wait_source = src;
  d->next_timeout = c->next_timeout = timeout_at(r, d->elapsed + w);
  c->attempt_start = d->elapsed + w; /* a host that does not ask next */
  d->rule = v->rule;
  if (c->judge->on_retry) {
    char *b = buffer(&c->hook_error);
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

static luaretry_code report(luaretry_call *c, int id, const luaretry_outcome *o,
                            const luaretry_class *forced, luaretry_decision *d) {
  if (!c || !o || !d) return LUARETRY_E_ARG;
  memset(d, 0, sizeof *d);
  if (c->stopped) {
    say(&c->errmsg, "the call already stopped (%s); begin a new one",
        luaretry_reason_name(c->reason));
    return LUARETRY_E_STATE;
  }
  lr_flight f;
  if (land(c, id, &f) != 0) {
    say(&c->errmsg, "attempt %d is not in flight", id);
    return LUARETRY_E_ARG;
  }
  ++c->attempts;
  d->attempt = f.id;
  d->hedge = f.hedge;
  double now = lr_clock_now(&c->clock);
  d->elapsed = now - c->start;
  if (f.start >= 0 && c->rules->hedge.percentile > 0 && (o->status || !o->error))
    lr_latency_record(c->rules->hedge.latency, d->elapsed - f.start);
  if (atomic_load_explicit(&c->waiter.cancelled, memory_order_relaxed)) {
    stop(c, d, LUARETRY_REASON_CANCELLED, "cancel");
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
  lr_attempt_ctx ctx = context(c, d->attempt, d->elapsed);
  ctx.hedge = f.hedge;
  c->judge->classify(c->judge->ud, o, &ctx, &v);
  /* A simulation forces the class, but the judge still runs: a wait the
   * script chooses, and its errors, are part of the schedule. */
  if (forced && v.cls != LUARETRY_CLASS_ERROR) {
    v.throttled =
      *forced == LUARETRY_CLASS_THROTTLING || (v.throttled && *forced == LUARETRY_CLASS_TRANSIENT);
    v.cls = *forced == LUARETRY_CLASS_THROTTLING ? LUARETRY_CLASS_TRANSIENT : *forced;
  }
  if (judged(c, o, &v, now, d)) {
    if (f.hedge && (v.cls == LUARETRY_CLASS_SUCCESS || v.cls == LUARETRY_CLASS_FINAL))
      lr_count(c->shared, LR_M_HEDGES_WON, 1);
    return LUARETRY_OK;
  }
  if (others_go_on(c, v.rule, d) || limited(c, now, d)) return LUARETRY_OK;
  retry_or_stop(c, o, &v, &ctx, d);
  return LUARETRY_OK;
}

static luaretry_code observed(luaretry_call *c, const luaretry_outcome *o, luaretry_decision *d,
                              luaretry_code rc) {
  if (rc == LUARETRY_OK && c->observer) c->observer(c->observer_ud, o, d);
  return rc;
}

luaretry_code luaretry_call_report(luaretry_call *c, const luaretry_outcome *o,
                                   luaretry_decision *d) {
  return observed(c, o, d, report(c, 0, o, NULL, d));
}

luaretry_code luaretry_call_report_attempt(luaretry_call *c, int attempt, const luaretry_outcome *o,
                                           luaretry_decision *d) {
  if (attempt <= 0) return LUARETRY_E_ARG;
  return observed(c, o, d, report(c, attempt, o, NULL, d));
}

luaretry_code lr_call_report_class(luaretry_call *c, const luaretry_outcome *o,
                                   luaretry_class forced, luaretry_decision *d) {
  return observed(c, o, d, report(c, 0, o, &forced, d));
}

/* ---- hedging: several attempts of one call in flight */

luaretry_code luaretry_call_start(luaretry_call *c, int *attempt) {
  if (!c || !attempt) return LUARETRY_E_ARG;
  if (c->stopped) {
    say(&c->errmsg, "the call already stopped (%s); begin a new one",
        luaretry_reason_name(c->reason));
    return LUARETRY_E_STATE;
  }
  if (c->in_flight) {
    say(&c->errmsg,
        "attempt %d is still in flight: a second one is a hedge "
        "(luaretry_call_hedge)",
        c->flight[0].id);
    return LUARETRY_E_STATE;
  }
  double at = luaretry_call_elapsed(c);
  c->flight[0] = (lr_flight){ ++c->started, 0, at };
  c->in_flight = 1;
  c->last_start = at;
  c->hedge_closed = c->rules->hedge.max <= 0 || c->no_hedge;
  if (!c->hedge_closed) c->hedge_delay = lr_latency_delay(&c->rules->hedge);
  *attempt = c->started;
  return LUARETRY_OK;
}

double luaretry_call_hedge_in(const luaretry_call *c) {
  if (!c || c->stopped || c->hedge_closed || c->in_flight == 0 ||
      c->hedges_in_flight >= c->rules->hedge.max)
    return -1;
  double left = c->last_start + c->hedge_delay - luaretry_call_elapsed(c);
  return left > 0 ? left : 0;
}

/* Why no hedge goes now (d filled, the round closed); 0 when one may. */
static int hedge_refused(luaretry_call *c, const luaretry_request *r, double now,
                         luaretry_decision *d) {
  const lr_rules *rules = c->rules;
  const char *why = NULL;
  int idempotent = 1, remote_said = 0;
  char *err = buffer(&c->errmsg);
  lr_attempt_ctx ctx = context(c, c->started + 1, now);
  if (!err) return -1;
  if (c->judge->is_idempotent(c->judge->ud, r, &idempotent, &ctx, err, MESSAGE_SIZE) != 0)
    return -1;
  if (!idempotent)
    why = "the request is not idempotent";
  else if (c->max_attempts > 0 && c->started >= c->max_attempts)
    why = "max_attempts";
  else if (rules->deadline > 0 && now >= rules->deadline)
    why = "deadline";
  else if (rules->guards.breaker && !breaker_admits(c, 0, now + c->start, &remote_said))
    why = "the circuit is open";
  else if (rules->guards.budget && !budget_allows(c, now + c->start, &remote_said))
    why = "the retry budget refuses";
  if (!why) return 0;
  c->hedge_closed = 1;
  d->retry = 0;
  d->reason = LUARETRY_REASON_NONE;
  d->message = say(&c->message, "no hedge: %s", why);
  d->in_flight = c->in_flight;
  return 1;
}

luaretry_code luaretry_call_hedge(luaretry_call *c, const luaretry_request *r,
                                  luaretry_decision *d) {
  if (!c || !r || !d) return LUARETRY_E_ARG;
  memset(d, 0, sizeof *d);
  d->attempt = c->started;
  d->elapsed = luaretry_call_elapsed(c);
  if (luaretry_call_hedge_in(c) != 0) {
    d->in_flight = c->in_flight;
    d->message = c->stopped ? NULL : "no hedge due";
    d->reason = c->stopped ? c->reason : LUARETRY_REASON_NONE;
    return LUARETRY_OK;
  }
  int refused = hedge_refused(c, r, d->elapsed, d);
  if (refused < 0) return LUARETRY_E_POLICY;
  if (refused) return LUARETRY_OK;
  if (c->flight == &c->one) {
    lr_flight *more = malloc(LR_FLIGHT_MAX * sizeof *more);
    if (!more) return LUARETRY_E_NOMEM;
    more[0] = c->one;
    c->flight = more;
  }
  /* paid when sent: a slow answer that succeeds would never pay */
  if (c->rules->guards.budget) lr_budget_spend(c->shared, &c->rules->guards);
  lr_count(c->shared, LR_M_HEDGES, 1);
  c->flight[c->in_flight++] = (lr_flight){ ++c->started, 1, d->elapsed };
  c->hedges_in_flight++;
  c->last_start = d->elapsed;
  d->retry = 1;
  d->hedge = 1;
  d->attempt = c->started;
  d->next_timeout = timeout_at(c->rules, d->elapsed);
  d->in_flight = c->in_flight;
  d->rule = "hedge";
  return LUARETRY_OK;
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
  lr_count(c->shared, LR_M_UNATTEMPTED, 1);
  if (c->observer) c->observer(c->observer_ud, NULL, d);
}

/* The host's operation gave up on attempt `attempt` with code rc. */
static void gave_up(luaretry_call *c, int attempt, luaretry_code rc, luaretry_decision *d) {
  d->attempt = attempt;
  d->elapsed = luaretry_call_elapsed(c);
  d->hook_error = NULL;
  stop_saying(c, d, LUARETRY_REASON_GAVE_UP, "operation",
              "attempt %d: the operation "
              "gave up: %s",
              attempt, luaretry_strerror(rc));
  lr_count(c->shared, LR_M_UNATTEMPTED, 1);
  say(&c->errmsg, "%s", d->message ? d->message : "the operation gave up");
  if (c->observer) c->observer(c->observer_ud, NULL, d);
}

/* luaretry_call_next until it says go at once (a rate limiter's token may
 * take waits) or stop; a cancel stops the call. */
static luaretry_code await_token(luaretry_call *c, luaretry_decision *d) {
  for (;;) {
    luaretry_code rc = luaretry_call_next(c, d);
    if (rc != LUARETRY_OK || !d->retry || !(d->wait > 0)) return rc;
    if (lr_wait(&c->clock, &c->waiter, d->wait)) {
      luaretry_call_stop_cancelled(c, d);
      return LUARETRY_OK;
    }
  }
}

luaretry_code luaretry_call_run(luaretry_call *c, luaretry_operation_fn op, void *ud,
                                luaretry_decision *final) {
  if (!c || !op || !final) return LUARETRY_E_ARG;
  memset(final, 0, sizeof *final);
  if (c->stopped) {
    /* refused at begin (circuit open): a decision, not a misuse */
    if (c->attempts == 0) return luaretry_call_next(c, final);
    return LUARETRY_E_STATE;
  }
  if (c->rules->guards.rate && c->attempts == 0) { /* the first attempt's token */
    luaretry_code rc = await_token(c, final);
    if (rc != LUARETRY_OK || !final->retry) return rc;
  }
  for (;;) {
    luaretry_outcome o;
    luaretry_outcome_init(&o);
    luaretry_code rc = op(ud, c, c->attempts + 1, c->next_timeout, &o);
    if (rc != LUARETRY_OK) {
      /* a cancel that reached the operation is still a cancel */
      if (rc == LUARETRY_E_CANCELLED && luaretry_call_cancelled(c)) {
        final->attempt = c->attempts;
        luaretry_call_stop_cancelled(c, final);
        return LUARETRY_OK;
      }
      gave_up(c, c->attempts + 1, rc, final);
      return rc;
    }
    rc = luaretry_call_report(c, &o, final);
    if (rc != LUARETRY_OK || !final->retry) return rc;
    if (lr_wait(&c->clock, &c->waiter, final->wait)) {
      luaretry_call_stop_cancelled(c, final);
      return LUARETRY_OK;
    }
    rc = await_token(c, final); /* the breaker may have opened meanwhile */
    if (rc != LUARETRY_OK || !final->retry) return rc;
  }
}
