/* call_internal.h: the call state machine's own state, shared by its
 * files and by nothing else: call_stop.c (how a call stops and says why),
 * guard_*.c (one guard each) and chain.c (every guard, in order),
 * call_report.c (an outcome judged into a decision), call_hedge.c
 * (several attempts in flight), call.c (its life and the step API's
 * questions) and call_run.c (the blocking call), each using only those
 * before it. */
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

/* What most calls never use, in a block of its own made on first use
 * (lr_call_cold): a call in flight is held by the thousand. */
typedef struct lr_call_cold {
  lr_shared *own;                /* this call's guards, when isolated */
  luaretry_observer_fn observer; /* luaretry_call_on_decision */
  void *observer_ud;
  char *message;            /* why the call stopped, for the decision */
  char *errmsg;             /* luaretry_call_errmsg */
  char *hook_error;         /* on_retry's error, for the decision */
  double throttle_previous; /* the throttling backoff's last wait */
  char invocation_id[37];   /* the invocation id's text, "" until asked */
  lr_call_data data;        /* the script side's, between decisions (info.call,
                               prepare()'s copies) */
  double hedge_delay;       /* hedging: this round's, fixed when its attempt
                               started */
  double last_start;        /* ... and the latest start in flight, call seconds */
  /* quota.c: the server's number of the latest attempt paced by its
   * RateLimit fields (rate.headers only) */
  unsigned long long quota_seq;
  /* A transient answer while others of its round were in flight (a
   * hedge's 429 with Retry-After): what it asked for, for the answer that
   * decides the round's wait (-1: nothing; round_set: these hold). */
  double round_asked;
  int round_throttled, round_set;
} lr_call_cold;

struct luaretry_call {
  /* Packed: 8-byte members first, then the 4-byte ones, then the flags
   * (a call in flight is held by the thousand; issue 28 wants 256 B). */
  uint32_t magic;
  int allowance;         /* the caller's retries, or -1: none given */
  const lr_rules *rules; /* the load's: a reload does not move them */
  const lr_judge *judge;
  lr_shared *shared;       /* the policy's budget, breaker and counters */
  const lr_remote *remote; /* asked first (the fleet), or NULL */
  long max_attempts;       /* the rules', or a simulation's; lowered by the
                              caller's allowance (LUARETRY_CALL_RETRIES) */
  lr_clock clock;
  lr_rng rng;
  double start;
  double deadline;      /* seconds into the call it ends by (0: none): the
                              earlier of the policy's and the host's own
                              (luaretry_call_options.deadline) */
  double guard_origin;  /* added to the clock for the guards */
  double previous;      /* decorrelated jitter's last wait */
  double attempt_start; /* seconds into the call the attempt began (the
                              breaker's slow-call rule) */
  double admit_at;      /* seconds into the call the next attempt's token
                              comes (the rate limiter) */
  double next_timeout;
  const char *stop_rule;
  uint64_t invocation; /* the seed of the invocation id's bits, from the start */
  /* made on first use: most calls never need them */
  struct lr_call_cold *cold; /* what most calls never use (lr_call_cold) */
  /* hedging: the attempts in flight, for a host that runs several at once
   * (luaretry_call_start, luaretry_call_hedge, luaretry_call_report_attempt) */
  lr_flight one;     /* the attempt in flight ... */
  lr_flight *flight; /* ... here, or LR_FLIGHT_MAX made at the first
                        hedge: most calls never hedge */
  double held_at;    /* the guard clock when admission counted it */
  lr_waiter waiter;
  int admitted;                              /* attempts that hold a token: the next has one
                   when admitted > attempts */
  int attempts;                              /* attempts reported so far */
  int started;                               /* attempts started (or reported unannounced) */
  unsigned char reason;                      /* a luaretry_reason */
  unsigned char in_flight, hedges_in_flight; /* at most LR_FLIGHT_MAX */
  unsigned char stopped;
  /* what few steps read, in one byte (bits), for room to what every
   * decision reads (rec_plain, rec_told, rate_free) */
  unsigned char quota_refused : 1; /* quota.c: the RateLimit fields, not the
                                      token bucket, left no room before the
                                      deadline */
  unsigned char no_hedge : 1;      /* LUARETRY_CALL_NO_HEDGE */
  unsigned char rate_remote : 2;   /* the fleet's rate limiter answered the last
                                      ask (2: the deadline passed while it was
                                      asked) */
  unsigned char remote_said : 1;   /* the fleet's view decided the last refusal */
  unsigned char token_held;        /* the limiter's token is taken; the server's
                                      quota is asked next */
  unsigned char hedge_closed;      /* no more hedges until the next attempt starts */
  unsigned char one_round;         /* LUARETRY_CALL_WORKFLOW_REQUEST: the enclosing call counts */
  unsigned char chain_on;          /* the guards on for this call (bits LR_G_*) */
  unsigned char held;              /* ... that hold something for the attempt asked for */
  /* lr_chain_init, from chain_on and the rules: the guards that record a
   * failure or a final answer (rec_plain), a success or a throttling
   * answer (rec_told); and whether the rate limiter is an adaptive one
   * that an unlimited token may serve (guard_rate.c's test, once) */
  unsigned char rec_plain, rec_told, rate_free;
  /* a retry the fleet's tokens refused went on to its wait for the
   * fleet's reserve (guard_budget.c): LR_RESERVE_ASKED; then what the
   * sync after the wait answered for it (chain.c): LR_RESERVE_GOT, a
   * retry of the fleet's reserve taken, or LR_RESERVE_GONE, spent */
  unsigned char reserve_asked;
  /* LR_CALL_LAZY_PACE: the adaptive rate is `own`'s, made at the first
   * success or throttling answer (or a fourth send within a second); until
   * then it is unlimited, and all it holds is when the sends went
   * (guard_rate.c) */
  unsigned char lazy_pace, lazy_sends; /* the sends are remote->lazy_sent */
};

/* A call in flight is held by the thousand (issue 28): at most 256 B on a
 * 64-bit host, what most calls never use in its cold block.  248, as
 * malloc's header takes 8 B more and rounds to 16: a 256-byte call took
 * 272 B (bench_decide's "memory per call in flight"). */
_Static_assert(sizeof(void *) != 8 || sizeof(struct luaretry_call) <= 248,
               "a call in flight holds at most 256 B with malloc's header: move what most "
               "calls never use into lr_call_cold");

/* Read as bytes: a foreign handle need not have a call's alignment. */
static inline int lr_call_ok(const luaretry_call *c) {
  uint32_t magic = 0;
  if (c) memcpy(&magic, (const void *)c, sizeof magic);
  return magic == LR_CALL_MAGIC;
}

/* A decision zeroed by a copy of a zero one: a memset of it is a `rep
 * stos`, whose start-up costs more than the stores, twice on every retry
 * (report, then next); a copy is a few vector moves, whatever fields the
 * struct gains. */
static inline void lr_decision_clear(luaretry_decision *d) {
  static const luaretry_decision zero;
  *d = zero;
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
  lr_attempt_ctx ctx = { attempt, elapsed, &c->rng,     c->cold ? &c->cold->data : NULL,
                         0,       c,       c->one_round };
  return ctx;
}

/* ---- call_stop.c */

/* The call's cold block, made on first use; NULL when out of memory. */
lr_call_cold *lr_call_cold_get(luaretry_call *c);
/* A slot of the cold block (&cold->f), or NULL when none can be had:
 * lr_call_buffer and lr_call_say then leave the message out. */
#define LR_COLD_SLOT(c, f) (lr_call_cold_get(c) ? &(c)->cold->f : NULL)
/* Tells the host's observer of a decision, if it set one. */
/* A call that stopped before any attempt, counted so (metrics.attempts is
 * retries + stops - these + hedges); a workflow's request is not a call
 * in the metrics: its stop is not counted, nor this. */
static inline void lr_count_unattempted(luaretry_call *c) {
  if (!c->one_round) lr_count(c->shared, LR_M_UNATTEMPTED, 1);
}

static inline void lr_call_observe(luaretry_call *c, const luaretry_outcome *o,
                                   const luaretry_decision *d) {
  if (c->cold && c->cold->observer) c->cold->observer(c->cold->observer_ud, o, d);
}

/* One of the call's message buffers, made on first use; NULL when out of
 * memory (the message is then left out, never the decision). */
char *lr_call_buffer(char **slot);
const char *lr_call_say(char **slot, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A NULL argument of a live call refused, named in its errmsg (which
 * otherwise still held the failure before, about something else). */
luaretry_code lr_call_refuse_null(luaretry_call *c, const char *fn, const char *arg)
  __attribute__((cold));
/* Stops the call for reason r (d filled; the attempts in flight are the
 * host's to cancel), with or without a message saying why. */
void lr_call_stop(luaretry_call *c, luaretry_decision *d, luaretry_reason r, const char *rule);
void lr_call_stop_saying(luaretry_call *c, luaretry_decision *d, luaretry_reason r,
                         const char *rule, const char *fmt, ...)
  __attribute__((format(printf, 5, 6)));
/* A final verdict's stop, with the script's reason when it gave one. */
void lr_call_stop_final(luaretry_call *c, luaretry_decision *d, const lr_verdict *v);
/* The call stops (deadline, said by `rule`): its next attempt would start
 * at `at`, past lr_latest_start. */
void lr_call_stop_starting_late(luaretry_call *c, luaretry_decision *d, const char *rule,
                                double at);

/* ---- chain.c and guard_*.c: one attempt, every guard (issue 28).
 *
 * Each guard is one unit (guard_<name>.c) behind one interface,
 * lr_guard_ops: admit an attempt of a kind at a time, hand back what it
 * gave when a later guard refuses, record an outcome of a class.  None
 * blocks (a fleet's view may make one bounded round trip, within what is
 * left of the deadline, ended at once by a cancel).  chain.c asks them in
 * the order of luaretry-policy(5)'s table, once per attempt, and records each
 * outcome once; no unit calls another (make check-layers holds it).
 * Each unit asks the fleet's view of itself first (lr_remote_ops, the
 * view's answer LR_REMOTE_LOCAL letting the local guard decide) and
 * counts locally either way, so the local guards are warm when the view
 * goes. */

typedef enum {
  LR_KIND_FIRST,   /* a call's first attempt: asked at lr_call_new */
  LR_KIND_RETRY,   /* asked when decided (report), again after its wait (next) */
  LR_KIND_HEDGE,   /* asked when the host would send it: now or never */
  LR_KIND_REQUEST, /* a workflow's request (a LUARETRY_CALL_ONE_ROUND call) */
} lr_kind;

typedef struct {
  lr_kind kind;
  int after_wait;  /* asked again as the attempt goes (luaretry_call_next) */
  int server;      /* the wait is the server's (the deadline's rule name) */
  double at;       /* call seconds the attempt would start */
  double now;      /* call seconds now */
  double wait;     /* out: extra seconds before it goes (the rate limiter) */
  const char *why; /* out: why no hedge (a hedge is refused, never stopped) */
} lr_ask;

typedef enum {
  LR_REC_SUCCESS,   /* a success */
  LR_REC_ANSWERED,  /* a final answer: the service answered */
  LR_REC_FAILURE,   /* a transient failure, not throttling */
  LR_REC_THROTTLED, /* the server throttled (429, is_throttling) */
} lr_rec_class;

typedef struct {
  lr_rec_class cls;
  const luaretry_outcome *o;
  double now;      /* the call's clock */
  double duration; /* the attempt's own time, seconds */
  int round;       /* a workflow's request: only what paces requests records */
} lr_record;

typedef struct {
  const char *name; /* which guards are on: lr_chain_init, from the rules */
  /* 0: the attempt may go (a->wait may grow); 1: refused: the call
   * stopped (d filled) or, for a hedge, a->why says why. */
  int (*admit)(luaretry_call *c, lr_ask *a, luaretry_decision *d);
  /* What admit gave the attempt (c->held's bit for the unit) is handed
   * back: a later guard refused it, or the call stopped before it went. */
  void (*give_back)(luaretry_call *c);
  void (*record)(luaretry_call *c, const lr_record *r);
} lr_guard_ops;

enum { /* the chain's order, CONTRACT's; bits of c->held and c->chain_on */
       LR_G_ATTEMPTS,
       LR_G_DEADLINE,
       LR_G_BREAKER,
       LR_G_ADMISSION,
       LR_G_BUDGET,
       LR_G_HEDGING,
       LR_G_RATE,
       LR_G_COUNT
};

/* c->reserve_asked: the fleet's reserve for a retry its tokens refused */
enum { LR_RESERVE_ASKED = 1, LR_RESERVE_GOT = 2, LR_RESERVE_GONE = 3 };

extern const lr_guard_ops lr_guard_attempts, lr_guard_deadline, lr_guard_breaker,
  lr_guard_admission, lr_guard_budget, lr_guard_hedging, lr_guard_rate;

/* max_attempts and the deadline let an attempt go (their units' first
 * test, inline: the chain skips them then, nothing held either way). */
static inline int lr_attempts_allow(const luaretry_call *c, const lr_ask *a) {
  return a->after_wait || (a->kind != LR_KIND_RETRY && a->kind != LR_KIND_HEDGE) ||
         c->started < c->max_attempts;
}
/* No attempt starts with less than this left of the deadline.  A host's
 * timers count milliseconds (libcurl's CURLOPT_TIMEOUT_MS, poll), and
 * libcurl's timeout can end up to one early, so an attempt timed out by
 * the deadline may be reported a little before it: a retry then would get
 * microseconds, send its request and be cut off. */
#define LR_ATTEMPT_LEAST 0.001
/* The latest an attempt may start, in seconds into the call (a deadline). */
static inline double lr_latest_start(const luaretry_call *c) {
  return c->deadline - LR_ATTEMPT_LEAST;
}
/* Digits after the point for a time in a deadline's messages: a
 * millisecond's, or a microsecond's under 10 ms (a host's 0.5 ms must not
 * read "0.001 s"). */
static inline int lr_seconds_digits(double seconds) { return seconds < 0.01 ? 6 : 3; }
static inline int lr_deadline_digits(const luaretry_call *c) {
  return lr_seconds_digits(c->deadline);
}
/* How a stop at `elapsed` past lr_latest_start says the deadline came. */
static inline const char *lr_deadline_came(const luaretry_call *c, double elapsed) {
  return elapsed >= c->deadline ? "passed" : "was less than 1 ms away";
}
static inline int lr_deadline_allows(const luaretry_call *c, const lr_ask *a) {
  return a->after_wait || a->at <= lr_latest_start(c);
}

/* The budget lets it go on its own tokens at once: not a retry nor a
 * hedge (it gates only those), or a retry decided now that the local
 * tokens allow (the unit's first test, inline: the chain skips the unit
 * then, as it holds nothing either way). */
static inline int lr_budget_allows(const luaretry_call *c, const lr_ask *a) {
  return (a->kind != LR_KIND_RETRY && a->kind != LR_KIND_HEDGE) ||
         (!c->remote && !a->after_wait && lr_budget_allows_retry(c->shared, &c->rules->guards));
}

/* The rate limiter's first test (guard_rate.c's), inline: an adaptive
 * rate before any throttling answer is unlimited (c->rate_free, worked
 * out once per call; the fleet's limiter is not asked for one, nor the
 * spread drawn): the send is counted, the token held, no wait: 1.  0:
 * the limiter decides. */
static inline __attribute__((always_inline)) int lr_rate_free_token(luaretry_call *c,
                                                                    double start) {
  if (!c->rate_free || c->token_held ||
      !lr_rate_count_free(c->shared, c->guard_origin + c->start + start))
    return 0;
  c->quota_refused = 0;
  c->admitted = c->attempts + 1;
  c->admit_at = start;
  return 1;
}
/* ... for a retry decided now, with no wait before it, within the
 * deadline (nearly every retry until a throttling answer comes). */
static inline __attribute__((always_inline)) int lr_rate_lets_retry(luaretry_call *c,
                                                                    const lr_ask *a) {
  return a->kind == LR_KIND_RETRY && !a->after_wait && a->wait == 0 &&
         (c->deadline <= 0 || a->at <= lr_latest_start(c)) && lr_rate_free_token(c, a->at);
}

/* Which guards are on for the call (c->chain_on), at lr_call_new. */
void lr_chain_init(luaretry_call *c);
/* The guards of `off` (bits LR_G_*) turned off after lr_chain_init. */
void lr_chain_narrow(luaretry_call *c, unsigned off);
/* Asks the guards of `on` (bits LR_G_*), in order; on a refusal, what the
 * earlier ones gave is handed back.  0: the attempt may go; 1: refused
 * (the call stopped, d filled; a hedge: a->why). */
int lr_chain_ask(luaretry_call *c, unsigned on, lr_ask *a, luaretry_decision *d);
/* Asks every guard that is on, as lr_chain_ask.  Inline, the guards whose
 * first test lets the attempt go are skipped here, and when none is left
 * nothing is called (a policy with its guards off, or a budget alone). */
static inline int lr_chain_admit(luaretry_call *c, lr_ask *a, luaretry_decision *d) {
  /* hedging's bound has nothing to say of a retry */
  unsigned skip = a->kind == LR_KIND_RETRY ? 1u << LR_G_HEDGING : 0;
  /* the first two and the budget hold nothing: when their first test lets
   * it go, not asked (a call each saved on every retry; the budget's
   * reads its tokens, which the guards before it do not touch) */
  if (lr_attempts_allow(c, a)) skip |= 1u << LR_G_ATTEMPTS;
  if (lr_deadline_allows(c, a)) skip |= 1u << LR_G_DEADLINE;
  if ((c->chain_on & (1u << LR_G_BUDGET)) && lr_budget_allows(c, a)) skip |= 1u << LR_G_BUDGET;
  unsigned on = c->chain_on & ~skip;
  /* the rate limiter last and alone (a retry's usual case): its first
   * test here, no guard before it left to refuse after its count */
  if (!on) return 0;
  if (on == 1u << LR_G_RATE && lr_rate_lets_retry(c, a)) return 0;
  return lr_chain_ask(c, on, a, d);
}
/* The attempt asked for went: what it holds is its own now. */
static inline void lr_chain_sent(luaretry_call *c) { c->held = 0; }
/* The call stops before its admitted attempt went: all handed back. */
void lr_chain_give_back(luaretry_call *c);
/* An outcome, to every guard that is on, and to the fleet's view once. */
void lr_chain_record_each(luaretry_call *c, const lr_record *r);
/* The same; a failure that only the local budget records (a retry's usual
 * case) is its record (guard_budget.c's) inline: a token taken. */
static inline void lr_chain_record(luaretry_call *c, const lr_record *r) {
  if (r->cls == LR_REC_FAILURE && c->rec_plain == 1u << LR_G_BUDGET && !c->remote && !r->round) {
    lr_budget_failure(c->shared, &c->rules->guards);
    return;
  }
  lr_chain_record_each(c, r);
}
/* A call refused before its first attempt (lr_call_new). */
void lr_chain_begin(luaretry_call *c);
/* After a probe permit's round trip (lr_call_new): the first attempt has
 * what is left of the deadline, or the call stops if nothing is. */
void lr_call_started_late(luaretry_call *c);
/* luaretry_call_next: the fleet's view brought up to date after a wait,
 * then the guards asked again as the attempt goes; 1 when the call
 * stopped (d filled, counted, observed). */
int lr_chain_going(luaretry_call *c, luaretry_decision *d);
/* Whether lr_chain_going has anything to do (its own test, inline: most
 * retries go with nothing asked again): the fleet's view, the breaker for
 * a retry holding no permit, the rate limiter for a token not asked for. */
static inline int lr_chain_asks_going(const luaretry_call *c) {
  if (c->remote) return 1;
  unsigned ask = c->chain_on & ((1u << LR_G_BREAKER) | (1u << LR_G_RATE));
  if (c->attempts == 0 || (c->held & (1u << LR_G_BREAKER))) ask &= ~(1u << LR_G_BREAKER);
  if (c->admitted > c->attempts) ask &= ~(1u << LR_G_RATE);
  return ask != 0;
}
/* In a refusal's message: whose counts decided. */
static inline const char *lr_whose(int remote) { return remote ? "the fleet's " : "the "; }

/* guard_rate.c, for lr_chain_init (c->rate_free, once per call),
 * luaretry_call_next's first attempt and the messages */
void lr_call_rate_prepare(luaretry_call *c);
double lr_call_rate_token(luaretry_call *c, double start);
void lr_call_stop_rate_limited(luaretry_call *c, luaretry_decision *d, double start);
/* call_allowance.c: the caller's allowance (LUARETRY_CALL_RETRIES): the
 * policy's own max_attempts, and the attempt a failure with no connection
 * gives back. */
long lr_call_policy_attempts(const luaretry_call *c);
void lr_call_unseen_failure_named(luaretry_call *c, const luaretry_outcome *o);
/* Its first test inline: nearly every outcome has a status or no error. */
static inline void lr_call_unseen_failure(luaretry_call *c, const luaretry_outcome *o) {
  if (c->allowance >= 0 && o->status == 0 && o->error) lr_call_unseen_failure_named(c, o);
}

#endif
