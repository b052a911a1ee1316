/* call_internal.h: the call state machine's own state, shared by its
 * files and by nothing else: call_stop.c (how a call stops and says why),
 * call_guards.c (what the guards say), call_report.c (an outcome judged
 * into a decision), call_hedge.c (several attempts in flight), call.c (its
 * life and the step API's questions) and call_run.c (the blocking call),
 * each using only those before it. */
#ifndef LR_CALL_INTERNAL_H
#define LR_CALL_INTERNAL_H

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

/* The first word of a call: a handle of another kind (a policy) is
 * refused with LUARETRY_E_ARG, as NULL is. */
#define LR_CALL_MAGIC 0x6c72636cu /* "lrcl" */
struct luaretry_call {
  uint32_t magic;
  const lr_rules *rules; /* the load's: a reload does not move them */
  const lr_judge *judge;
  lr_shared *shared;       /* the policy's budget, breaker and counters */
  lr_shared *own;          /* ... or this call's own, when isolated */
  const lr_remote *remote; /* asked first (the fleet), or NULL */
  long max_attempts;       /* the rules', or a simulation's; lowered by the
                              caller's allowance (LUARETRY_CALL_RETRIES) */
  int allowance;           /* the caller's retries, or -1: none given */
  lr_clock clock;
  lr_waiter waiter;
  lr_rng rng;
  double start;
  double deadline;          /* seconds into the call it ends by (0: none): the
                              earlier of the policy's and the host's own
                              (luaretry_call_options.deadline) */
  double guard_origin;      /* added to the clock for the guards */
  double previous;          /* decorrelated jitter's last wait */
  double throttle_previous; /* ... and the throttling backoff's */
  double attempt_start;     /* seconds into the call the attempt began (the
                              breaker's slow-call rule) */
  double admit_at;          /* seconds into the call the next attempt's token
                              comes (the rate limiter) */
  int admitted;             /* attempts that hold a token: the next has one
                              when admitted > attempts */
  /* quota.c: the server's number of the latest attempt paced by its
   * RateLimit fields, and whether they, not the token bucket, left no room
   * before the deadline */
  unsigned long long quota_seq;
  int quota_refused;
  int token_held; /* the limiter's token is taken; the server's quota is asked next */
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
  int one_round;      /* LUARETRY_CALL_WORKFLOW_REQUEST: the enclosing call counts */
  double hedge_delay; /* this round's, fixed when its attempt started */
  double last_start;  /* the latest start in flight, call seconds */
  lr_flight one;      /* the attempt in flight ... */
  lr_flight *flight;  /* ... here, or LR_FLIGHT_MAX made at the first
                               hedge: most calls never hedge */
  int rate_remote;    /* the fleet's rate limiter answered the last ask (2:
                         the deadline passed while it was asked) */
};

/* Read as bytes: a foreign handle need not have a call's alignment. */
static inline int lr_call_ok(const luaretry_call *c) {
  uint32_t magic = 0;
  if (c) memcpy(&magic, (const void *)c, sizeof magic);
  return magic == LR_CALL_MAGIC;
}

/* Nanoseconds for the counters, clamped: a 1e300 s wait still counts. */
static inline long long lr_clamp_ns(double seconds) {
  return seconds >= 9.2e9 ? (long long)9.2e18 : seconds > 0 ? (long long)(seconds * 1e9) : 0;
}

/* The timeout of an attempt starting `at` seconds into the call. */
static inline double lr_call_timeout_at(const luaretry_call *c, double at) {
  double t = c->rules->attempt_timeout;
  if (c->deadline > 0) {
    double left = c->deadline - at;
    if (left < 0) left = 0;
    if (t == 0 || left < t) t = left;
  }
  return t;
}

static inline lr_attempt_ctx lr_call_context(luaretry_call *c, int attempt, double elapsed) {
  lr_attempt_ctx ctx = { attempt, elapsed, &c->rng, &c->data, 0, c };
  return ctx;
}

/* ---- call_stop.c */

/* One of the call's message buffers, made on first use; NULL when out of
 * memory (the message is then left out, never the decision). */
char *lr_call_buffer(char **slot);
const char *lr_call_say(char **slot, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Stops the call for reason r (d filled; the attempts in flight are the
 * host's to cancel), with or without a message saying why. */
void lr_call_stop(luaretry_call *c, luaretry_decision *d, luaretry_reason r, const char *rule);
void lr_call_stop_saying(luaretry_call *c, luaretry_decision *d, luaretry_reason r,
                         const char *rule, const char *fmt, ...)
  __attribute__((format(printf, 5, 6)));
/* A final verdict's stop, with the script's reason when it gave one. */
void lr_call_stop_final(luaretry_call *c, luaretry_decision *d, const lr_verdict *v);

/* ---- call_guards.c: the remote view (the fleet) first, the local guards
 * when it does not know; `now` is the call's clock.  *remote says who
 * answered, for the message.  The int functions answer 1 when the call
 * stopped (d filled). */

int lr_call_budget_allows(luaretry_call *c, double now, int *remote);
int lr_call_breaker_admits(luaretry_call *c, int first_attempt, double now, int *remote);
/* The rate limiter's token for an attempt `start` seconds into the call:
 * the extra wait, or -1 past the deadline. */
double lr_call_rate_token(luaretry_call *c, double start);
void lr_call_stop_rate_limited(luaretry_call *c, luaretry_decision *d, double start);
/* At lr_call_new: after a probe permit's round trip, and the guards that
 * refuse a first attempt. */
void lr_call_started_late(luaretry_call *c);
void lr_call_refused_at_begin(luaretry_call *c);
int lr_call_refused_after_wait(luaretry_call *c, luaretry_decision *d);
/* A verdict's effect on the guards; 1 when it ends the call. */
int lr_call_judged(luaretry_call *c, const luaretry_outcome *o, const lr_verdict *v, double now,
                   luaretry_decision *d);
/* The limits that end a call before its wait: attempts, budget, breaker,
 * throttle. */
int lr_call_limited(luaretry_call *c, double now, luaretry_decision *d);
/* The caller's allowance (LUARETRY_CALL_RETRIES): the policy's own
 * max_attempts, and the attempt a failure with no connection gives back. */
long lr_call_policy_attempts(const luaretry_call *c);
void lr_call_unseen_failure(luaretry_call *c, const luaretry_outcome *o);

#endif
