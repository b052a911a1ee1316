/* engine.h: the engine's private interface, for the layers above it (the
 * policy's script side, the fleet).  No Lua, no curl here: the clock, the
 * RNG, the backoff arithmetic, the guards and the call state machine are
 * plain C.  The engine never calls up: the policy hands each call its
 * judge (callbacks), its rules and its guards at lr_call_new(). */
#ifndef LUARETRY_ENGINE_H
#define LUARETRY_ENGINE_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "luaretry.h"

/* ---- the engine's short locks (the budget's and breaker's windows, the
 * throttle's counts, the rate limiter, the quota): held for a few
 * instructions, so a waiter spins a little, then yields its time slice
 * (sched_yield) instead of spinning on a holder the scheduler preempted:
 * on 2 cores a pure spin burned a whole slice (issue 28, finding 10). */
#define LR_SPIN_TRIES 64
void lr_lock_contended(atomic_flag *f);
/* Inline: a free lock (nearly always) is one exchange, no call. */
static inline void lr_lock(atomic_flag *f) {
  if (atomic_flag_test_and_set_explicit(f, memory_order_acquire)) lr_lock_contended(f);
}
static inline void lr_unlock(atomic_flag *f) {
  atomic_flag_clear_explicit(f, memory_order_release);
}

/* ---- clock.c: monotonic time, virtual time, cancellable waits */

typedef struct {
  int is_virtual;
  double virtual_now; /* seconds, only for the virtual clock */
} lr_clock;

double lr_monotonic_now(void); /* CLOCK_MONOTONIC in seconds */
int64_t lr_monotonic_ms(void); /* the same in milliseconds: I/O deadlines */
/* CLOCK_MONOTONIC_COARSE in ms (a few ms behind, a few ns to read): for
 * hot paths that only compare against periods of seconds. */
int64_t lr_monotonic_coarse_ms(void);
/* Inline: read on every decision, and a virtual clock is a load. */
static inline double lr_clock_now(const lr_clock *c) {
  return c->is_virtual ? c->virtual_now : lr_monotonic_now();
}

typedef struct {
  atomic_int cancelled;
  atomic_int wakeup_fd; /* eventfd, or -1 until needed */
  atomic_int blocking;  /* the call's thread waits in the library (luaretry_call_wait,
                           luaretry_call_run): a remote view may make it wait for a
                           pre-retry round trip; 0: an event loop's, never */
} lr_waiter;

void lr_waiter_init(lr_waiter *w);
/* The fd a cancel writes to, made on first use; -1 if none can be had. */
int lr_waiter_fd(lr_waiter *w);
void lr_waiter_close(lr_waiter *w);
void lr_waiter_cancel(lr_waiter *w); /* async-signal-safe */
/* 0 when `seconds` have passed on the clock, 1 when cancelled. */
int lr_wait(lr_clock *c, lr_waiter *w, double seconds);

/* ---- rng.c: xoshiro256**, one stream per call */

typedef struct {
  uint64_t s[4];
} lr_rng;

void lr_rng_seed(lr_rng *r, uint64_t seed);
int lr_rng_seed_os(lr_rng *r); /* 0, or -1 (errno set) */
/* Inline: a retry draws its jitter (and the server's wait its spread) on
 * every decision, where three calls into rng.c cost as much as the draw. */
static inline uint64_t lr_rng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static inline uint64_t lr_rng_next(lr_rng *r) {
  uint64_t *s = r->s;
  uint64_t result = lr_rng_rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = lr_rng_rotl(s[3], 45);
  return result;
}
/* Uniform in [0, 1): the top 53 bits make every representable step
 * equally likely (no modulo, no bias). */
static inline double lr_rng_unit(lr_rng *r) { return (double)(lr_rng_next(r) >> 11) * 0x1.0p-53; }
static inline double lr_rng_uniform(lr_rng *r, double lo, double hi) {
  if (!(hi > lo)) return lo;
  return lo + (hi - lo) * lr_rng_unit(r);
}

/* ---- backoff.c: the arithmetic of README.md "The arithmetic" */

typedef struct {
  luaretry_backoff_kind kind;
  double initial, multiplier, max, step;
  luaretry_jitter jitter;
  double jitter_max;
  int cap_jitter;
  uint64_t capped_from; /* set by lr_backoff_prepare */
} lr_backoff;

/* Completes *b once its fields are set (precomputes where the cap starts). */
void lr_backoff_prepare(lr_backoff *b);

/* The raw delay d for retry n (n = 0 before the second attempt), without
 * cap or jitter; finite or +inf, never NaN or negative. */
double lr_backoff_raw(const lr_backoff *b, uint64_t n);
/* The wait for retry n; *previous carries decorrelated jitter's state
 * (start it at b->initial) and is updated.  *capped says whether the cap
 * decided the wait. */
double lr_backoff_wait(const lr_backoff *b, uint64_t n, double *previous, lr_rng *r, int *capped);

/* ---- guard.c: the budget, the breaker and the counters of a policy */

typedef struct {
  int budget; /* retry throttling on */
  double max_tokens, token_ratio;
  /* retries per second the budget allows whatever its tokens (Finagle's
   * floor), LR_RESERVE_SPAN s of them held at once; 0: none */
  double reserve;
  double throttle_cost; /* tokens a throttling outcome takes */
  int breaker;          /* circuit breaker on */
  int failures;         /* transient failures in a row to open */
  double open_seconds;
  int probes; /* calls let through when half-open */
  /* the rate rules, beside `failures`: over the last `window` outcomes
   * (once `min_calls` are in), open when the share of failures reaches
   * failure_rate, or that of attempts lasting slow_seconds or more
   * reaches slow_rate.  0: off. */
  double failure_rate, slow_seconds, slow_rate;
  int window, min_calls;
  /* client-side throttling (the SRE book's): 0: off */
  double throttle_k, throttle_window;
  /* the rate limiter: a token bucket of rate_limit per second (adaptive:
   * the most it may reach; 0: no most) and rate_burst tokens */
  int rate, rate_adaptive;
  double rate_limit;
  long rate_burst;
  /* rate.headers: the server's RateLimit fields pace the next attempts
   * (quota.c); max_wait bounds the reset it believes (max_retry_after) */
  int rate_headers;
  double rate_headers_max_wait;
  /* lr_guards_prepare: max_tokens, token_ratio and throttle_cost in
   * thousandths of a token, as the budget counts (rounded once, at load,
   * not on every retry and outcome) */
  long long milli_max, milli_ratio, milli_throttle;
} lr_guards;

/* Completes *g once its fields are set (the budget's thousandths). */
void lr_guards_prepare(lr_guards *g);

#define LR_WINDOW_MAX 1000 /* outcomes a rate window may hold */

/* Seconds of the budget's reserve held at once (guard.c). */
#define LR_RESERVE_SPAN 50.0

/* Every attempt ends in a decision: a retry, or a stop for a reason.  So
 * attempts are not counted one by one (an atomic less per decision): they
 * are retries plus stops, less the stops that followed no attempt of their
 * own (LR_M_UNATTEMPTED: refused at begin, a cancel or a refusal after a
 * wait, an operation that gave up). */
enum {
  LR_M_CALLS,
  LR_M_UNATTEMPTED,
  LR_M_RETRIES,
  LR_M_SUCCESSES,
  LR_M_FINALS,
  LR_M_EXHAUSTED,
  LR_M_DEADLINE,
  LR_M_POLICY_ERRORS,
  LR_M_CANCELLED,
  LR_M_BUDGET,
  LR_M_CIRCUIT,
  LR_M_BREAKER_OPENINGS,
  LR_M_GAVE_UP,
  LR_M_SERVER_WAIT,
  LR_M_THROTTLE_STOPS,
  LR_M_RATE_STOPS, /* the last of the stops */
  LR_M_THROTTLED,
  LR_M_HEDGES,
  LR_M_HEDGES_WON,
  LR_M_HEDGES_CANCELLED, /* hedging: not stops */
  LR_METRIC_COUNT
};

/* quota.c's state: what the server's RateLimit fields said of its quota,
 * under its own spin lock (guard clock).  `until`: the server's window
 * ends then; `span`: its length as first told (resets within a quarter of
 * it are the same window's); `next`: the earliest start of the next
 * attempt; `spacing`: seconds between attempts once the window is spent or
 * over (w / q, else t / (r + 1) of the window's first answer; 0: none
 * known); `left`: attempts the server still takes before `until`; `sent`:
 * attempts paced so far (an answer's count is lowered by those sent after
 * its own). */
typedef struct {
  atomic_flag lock;
  double until, span, next, spacing;
  long long left;
  unsigned long long sent;
} lr_quota_pace;

/* pace.c's state: the client-side throttle's counts (ten buckets over its
 * window) and the rate limiter's (GCRA's theoretical arrival time, the
 * adaptive rate), under a spin lock held for a few instructions. */
#define LR_PACE_BUCKETS 10
/* Events by tenth of a second.  Atomic: an adaptive rate not limited yet
 * (every healthy service's) counts its sends and successes without the
 * lock; a count two threads lose to a bucket's turn moves an estimate the
 * first decrease starts from, never a decision. */
typedef struct {
  atomic_llong slot[LR_PACE_BUCKETS];
  atomic_long n[LR_PACE_BUCKETS];
} lr_tally;
enum { LR_T_SENT, LR_T_OK, LR_T_THR, LR_TALLIES };
typedef struct {
  atomic_flag lock;
  long long bucket_slot[LR_PACE_BUCKETS];
  long requests[LR_PACE_BUCKETS], accepts[LR_PACE_BUCKETS];
  /* the window's totals for the bucket slot sum_slot (valid when sum_ok),
   * kept as the buckets change: an ask sums nothing while the slot stays */
  long long sum_slot;
  long sum_requests, sum_accepts;
  int sum_ok;
  double tat;         /* when the next token is free (guard clock) */
  double rate;        /* adaptive: tokens per second now; 0: not limited yet */
  atomic_int limited; /* rate > 0, read without the lock */
  /* attempts (the send rate), successes (what the service took),
   * throttling answers (adaptive); by thread stripe when by_stripe is
   * set (lr_pace_spread: a policy's, which threads share).  by_stripe
   * beside `limited`: a send counted reads both, one line */
  struct lr_tallies *by_stripe;
  double last_decrease; /* adaptive: when it last slowed down */
  lr_tally tally[LR_TALLIES];
  int probing; /* still growing fast after the first one (slow start) */
  lr_quota_pace quota;
} lr_pace;

/* The counters, striped: each thread adds to a stripe of its own (by a
 * thread-local index), so threads deciding at once do not fight over one
 * line.  The first LR_OWNED_STRIPES threads to count own one each: its
 * one writer adds with a plain load and store, no locked instruction;
 * later threads share the rest, with atomic adds.  A stripe spans whole
 * pairs of lines (the adjacent-line prefetcher fetches lines in aligned
 * pairs), so no two stripes share a pair.  A reader sums the stripes.
 * v[LR_METRIC_COUNT] holds the nanoseconds waited, v[LR_BUDGET_PENDING]
 * the budget's successes not in its count yet (guard.c). */
#define LR_OWNED_STRIPES  6
#define LR_STRIPES        8
#define LR_BUDGET_PENDING (LR_METRIC_COUNT + 1)
typedef struct {
  _Alignas(128) atomic_llong v[LR_BUDGET_PENDING + 1];
} lr_stripe;

/* The thread's stripe (grace.c): k > 0 its own (stripe k - 1, the thread
 * its only writer), k < 0 shared with other threads (stripe -k - 1). */
extern _Thread_local int lr_thread_stripe;
int lr_choose_stripe(void);
static inline int lr_stripe_now(void) {
  int k = lr_thread_stripe;
  return k ? k : lr_choose_stripe();
}
/* The stripe's index, owned or shared. */
static inline int lr_stripe_index(int k) { return (k > 0 ? k : -k) - 1; }

/* ---- grace.c: what every call reads and a reload replaces, without a
 * lock.  A reader opens a window (lr_read_begin) around its load of the
 * shared pointer and the reference it takes; a writer that replaced the
 * pointer waits out every window then open (lr_grace) before it frees
 * what the pointer held.  A window is a count on the thread's stripe: two
 * locked adds on a line no other thread writes, where a mutex made two
 * threads' calls pass its line back and forth. */
int lr_read_begin(void);
void lr_read_end(int window);
void lr_grace(void);

/* A reference count striped by thread (Linux's percpu_ref, on stripes):
 * while the object is published (lr_sref_publish), a take and a give
 * change the thread's own stripe; once nothing can reach it but the
 * references held, lr_sref_retire folds the stripes into one count after
 * a grace, and the give that takes that count to 0 says so.  It starts
 * with one reference, the maker's, which a published object keeps until
 * it is retired. */
typedef struct {
  _Alignas(128) atomic_long n;
} lr_sref_stripe;
typedef struct {
  lr_sref_stripe stripe[LR_STRIPES];
  _Alignas(128) atomic_long central;
  atomic_int striped;
} lr_sref;
void lr_sref_init(lr_sref *r);
void lr_sref_publish(lr_sref *r);
void lr_sref_take(lr_sref *r);
/* The same, within a window the caller opened (a pointer just read). */
void lr_sref_take_in(lr_sref *r, int window);
/* 1: that was the last reference. */
int lr_sref_give(lr_sref *r);
void lr_sref_retire(lr_sref *r);

typedef struct {
  lr_stripe stripes[LR_STRIPES];
  lr_guards guards; /* the settings last configured: for a reload to
                                 tell whether they changed */
  atomic_llong milli_tokens;
  atomic_llong milli_max;      /* guards.max_tokens in thousandths, for readers
                                  that hold no lock (a reload writes guards) */
  atomic_llong hedge_milli;    /* hedging's credit, in thousandths of a hedge */
  atomic_llong reserve_tat_ns; /* the reserve's GCRA: when it was last empty */
  atomic_int breaker_state, consecutive_failures, probes_left;
  atomic_llong opened_at_ns;
  /* the rate rules' window: a ring of the last outcomes (bit 0: failed,
   * bit 1: slow), under a spin lock held for a few instructions */
  atomic_flag window_lock;
  int window_len, window_pos, window_failed, window_slow;
  unsigned char window_ring[LR_WINDOW_MAX];
  lr_pace pace;
  luaretry_breaker_fn on_change;
  void *on_change_ud;
} lr_shared;

void lr_shared_init(lr_shared *s, const lr_guards *g);
/* New settings (a load or an override): tokens and breaker start afresh
 * when they changed; the counters go on. */
void lr_shared_configure(lr_shared *s, const lr_guards *g);
void lr_count(lr_shared *s, int metric, long long n);
/* n more of a metric on stripe k (lr_stripe_now's). */
static inline void lr_count_in(lr_shared *s, int k, int metric, long long n) {
  if (k > 0) { /* the one writer: no locked add needed */
    atomic_llong *v = &s->stripes[k - 1].v[metric];
    long long old = atomic_load_explicit(v, memory_order_relaxed);
    /* saturates: the wait total of absurd waits (clamped to 9.2e18 ns each)
     * must not overflow, which a plain signed add would */
    atomic_store_explicit(v, n > 0 && old > LLONG_MAX - n ? LLONG_MAX : old + n,
                          memory_order_relaxed);
  } else {
    atomic_fetch_add_explicit(&s->stripes[-k - 1].v[metric], n, memory_order_relaxed);
  }
}
/* A retry and its wait (ns), counted at once (one stripe lookup; inline:
 * every retry counts them). */
static inline void lr_count_retry(lr_shared *s, long long wait_ns) {
  int k = lr_stripe_now();
  lr_count_in(s, k, LR_M_RETRIES, 1);
  lr_count_in(s, k, LR_METRIC_COUNT, wait_ns);
}
/* The sum of a counter over the stripes (metric LR_METRIC_COUNT: the
 * nanoseconds waited). */
long long lr_counted(const lr_shared *s, int metric);
/* Memory for an lr_shared (or a struct holding one): aligned for its
 * stripes, zeroed; free() releases it. */
void *lr_aligned_calloc(size_t size);
/* The settings `g` are the call's (its rules'), `now` its clock's. */
int lr_budget_allows_summed(lr_shared *s, const lr_guards *g);
/* Inline: the count alone is most often enough (the stripes only add). */
static inline int lr_budget_allows_retry(lr_shared *s, const lr_guards *g) {
  if (!g->budget) return 1;
  return atomic_load(&s->milli_tokens) * 2 > g->milli_max || lr_budget_allows_summed(s, g);
}
double lr_budget_tokens(lr_shared *s);
/* The budget in thousandths of a token: its count and its threads'
 * successes not in it yet, at most its max. */
long long lr_budget_milli(lr_shared *s);
/* Whether an attempt may go now: closed, yes; open, no (half-open once
 * open_seconds passed); half-open, when a probe permit is left, taken
 * (*permit = 1): every attempt in half-open takes one, whatever its kind.
 * The simulated fleet asks it as the fleet would. */
/* The budget's floor: 1 when a retry the tokens refuse may go all the
 * same, taking one of the reserve's retries (budget.reserve per second,
 * LR_RESERVE_SPAN seconds of them held at once); 0 when none is left. */
int lr_budget_reserve_take(lr_shared *s, const lr_guards *g, double now);
/* The same test on a GCRA's state *tat (seconds) without atomics, for a
 * fleet's state kept elsewhere (simfleet.c; Redis runs it in ms). */
int lr_reserve_gcra(double *tat, double reserve, double now);
int lr_breaker_admits(lr_shared *s, const lr_guards *g, int first_attempt, double now);
int lr_breaker_permit(lr_shared *s, const lr_guards *g, double now, int *permit);
/* A permit handed back: its attempt was refused by a later guard, or its
 * answer told nothing (a throttling answer, neutral to the breaker). */
void lr_breaker_give_back(lr_shared *s, const lr_guards *g);
/* One guard's part of an outcome (the chain's units record each their own). */
void lr_breaker_success(lr_shared *s, const lr_guards *g, double now);
void lr_breaker_failure(lr_shared *s, const lr_guards *g, double now);
void lr_budget_success(lr_shared *s, const lr_guards *g);
void lr_budget_failure(lr_shared *s, const lr_guards *g);
void lr_budget_throttled(lr_shared *s, const lr_guards *g);
/* Both at once (the simulated fleet). */
void lr_guards_success(lr_shared *s, const lr_guards *g, double now);
void lr_guards_failure(lr_shared *s, const lr_guards *g, double now);
/* A throttling answer: budget.throttle_cost tokens; neutral to the
 * breaker (neither a failure nor a reset of the count; a half-open
 * breaker's permit is handed back, the breaker stays half-open). */
void lr_guards_throttled(lr_shared *s, const lr_guards *g, double now);
/* Whether the breaker has rate rules. */
int lr_breaker_rated(const lr_guards *g);
/* An outcome into the rate window (failed: a transient failure, not
 * throttling; slow: the attempt lasted slow_seconds or more), which opens
 * a closed circuit when a rate is reached.  1 when this outcome opened it. */
int lr_breaker_record(lr_shared *s, const lr_guards *g, int failed, int slow, double now);
void lr_guards_answered(lr_shared *s, const lr_guards *g, double now);

/* ---- pace.c: client-side throttling and the rate limiter (guard clock) */

void lr_pace_init(lr_pace *p);
/* Starts afresh under its lock (new settings while calls run). */
void lr_pace_reset(lr_pace *p);
/* The pace's counts by thread stripe from now on (a policy's, which its
 * threads share: each counts on lines of its own); -1 out of memory (they
 * stay as they were).  lr_pace_unspread frees them. */
int lr_pace_spread(lr_pace *p);
void lr_pace_unspread(lr_pace *p);
/* The throttle: 1 when an attempt may go now (it is counted as a
 * request either way); `u` is a uniform draw in [0, 1) from the call. */
int lr_throttle_admits(lr_shared *s, const lr_guards *g, double now, double u);
/* A request counted at `now` and not sent after all (a later guard refused
 * the attempt, or the call stopped before it went): uncounted. */
void lr_throttle_unrequest(lr_shared *s, const lr_guards *g, double now);
/* The throttle's probability of refusing now, for messages. */
double lr_throttle_refusal(lr_shared *s, const lr_guards *g, double now);
/* An answer: accepted (a success or a final answer) or not. */
void lr_throttle_record(lr_shared *s, const lr_guards *g, int accepted, double now);
/* The SRE formula on counts: max(0, (requests - k * accepts) / (requests + 1)). */
double lr_throttle_formula(double k, double requests, double accepts);
/* A simulated fleet's side: counts added at `now` in a batch, and the
 * window's totals at `now`. */
void lr_throttle_add(lr_shared *s, const lr_guards *g, long long requests, long long accepts,
                     double now);
void lr_throttle_totals(lr_shared *s, const lr_guards *g, double now, double *requests,
                        double *accepts);
/* A token for an attempt that would start at `at` (`now`: the guard
 * clock now): the extra seconds to wait for it (0: at once), reserved
 * (*held = 1); or the seconds after which to ask again (*held = 0): 0 for
 * an attempt after `now` whose token is free at `at`, and, adaptive, when
 * it would come more than a tenth of a second ahead (`u` in [0, 1)
 * spreads them); or -1, nothing reserved, when it would come after
 * `latest`. */
double lr_rate_reserve(lr_shared *s, const lr_guards *g, double now, double at, double latest,
                       double u, int *held);
/* The same, with `u` drawn from rng under the pace's lock only when the
 * rate paces (adaptive, a rate found): what the caller would draw after
 * asking lr_rate_now, with one lock instead of two. */
double lr_rate_reserve_drawn(lr_shared *s, const lr_guards *g, double now, double at, double latest,
                             lr_rng *rng, int *held);
/* pace.c's counts, inline here: a retry's decision counts its send (and a
 * success its answer) while the adaptive rate does not pace. */

/* A stripe's tallies: two threads counting the same send rate add on
 * lines of their own (the sum is read only as the rate changes). */
struct lr_tallies {
  _Alignas(128) lr_tally t[LR_TALLIES];
};

/* A bucket's number for x (time over its width), clamped: a call on the
 * virtual clock may stand 1e300 s in. */
static inline long long lr_pace_slot(double x) {
  if (!(x > -9e15)) return (long long)-9e15;
  if (x > 9e15) return (long long)9e15;
  /* floor(x) without libm's call (one per send counted): below 2^53 the
   * truncation is exact, and one less when it went up */
  long long i = (long long)x;
  return (double)i > x ? i - 1 : i;
}

/* An event at `at` in tally t.  `owned`: the thread's own stripe's tally,
 * whose one writer it is (as the counters): plain stores, no locked add. */
static inline __attribute__((always_inline)) void lr_tally_count(lr_tally *t, double at,
                                                                 int owned) {
  long long slot = lr_pace_slot(at * 10);
  int i = (int)(slot % LR_PACE_BUCKETS); /* one division, not two: */
  if (i < 0) i += LR_PACE_BUCKETS;       /* a slot before 0 counts too */
  long long was = atomic_load_explicit(&t->slot[i], memory_order_relaxed);
  if (owned) {
    long n = was == slot ? atomic_load_explicit(&t->n[i], memory_order_relaxed) : 0;
    if (was != slot) atomic_store_explicit(&t->slot[i], slot, memory_order_relaxed);
    atomic_store_explicit(&t->n[i], n + 1, memory_order_relaxed);
    return;
  }
  if (was != slot) {
    /* the bucket's turn: one thread empties it; another's count that
     * lands between the two stores is lost (an estimate) */
    if (atomic_compare_exchange_strong_explicit(&t->slot[i], &was, slot, memory_order_relaxed,
                                                memory_order_relaxed))
      atomic_store_explicit(&t->n[i], 1, memory_order_relaxed);
    else
      atomic_fetch_add_explicit(&t->n[i], 1, memory_order_relaxed);
    return;
  }
  atomic_fetch_add_explicit(&t->n[i], 1, memory_order_relaxed);
}

/* An event (LR_T_*) in the thread's stripe's tally, or the pace's own. */
static inline __attribute__((always_inline)) void lr_pace_count(lr_pace *p, int which, double at) {
  if (!p->by_stripe) {
    lr_tally_count(&p->tally[which], at, 0);
    return;
  }
  int k = lr_stripe_now();
  lr_tally_count(&p->by_stripe[lr_stripe_index(k)].t[which], at, k > 0);
}

/* Adaptive with no `limit` (the caller knows: a call's rate_free, worked
 * out once), before the first throttling answer: the rate is unlimited
 * and a send is only counted (the first decrease starts from them when
 * nothing succeeded), at `at`: 1.  0, nothing counted, once the rate
 * paces: lr_rate_reserve decides.  What lr_rate_reserve does then, without
 * its arithmetic or its lock: a retry's decision pays a count. */
static inline __attribute__((always_inline)) int lr_rate_count_free(lr_shared *s, double at) {
  lr_pace *p = &s->pace;
  /* not limited yet (current_rate's 0): counted without the lock; a send
   * as the first decrease lands goes as one just before it would */
  if (atomic_load_explicit(&p->limited, memory_order_acquire)) return 0;
  lr_pace_count(p, LR_T_SENT, at);
  return 1;
}
/* A token reserved and not used (a later guard refused the attempt):
 * handed back (the bucket's time back to `tat_before`) when the bucket's
 * time is still `tat_after`, the one its reservation set. */
void lr_rate_give_back(lr_shared *s, const lr_guards *g, double tat_before, double tat_after);
double lr_rate_tat(lr_shared *s);
/* The adaptive rate follows the answers: throttling slows it down, a
 * success speeds it up; `sent` when the attempt answered went. */
void lr_rate_answer(lr_shared *s, const lr_guards *g, int throttled, double now, double sent);
/* Tokens per second now (0: none). */
double lr_rate_now(lr_shared *s, const lr_guards *g);

/* ---- quota.c: pacing by the server's RateLimit fields (rate.headers) */

/* What the rate-limit fields say (retry_after.c's readers): `remaining`
 * requests until `reset` seconds from now; `quota` per `window` seconds
 * when a RateLimit-Policy says so (0: not said). */
typedef struct {
  double remaining, reset, quota, window;
} lr_quota_hint;
/* 1: read; 0: no such field; -1: a field that does not read (ignored). */
int lr_quota_read(const luaretry_header *headers, size_t count, double now, lr_quota_hint *q);
/* luaretry_retry_after's and luaretry_rate_limit's readers: the wait, or
 * -1 for none; `now` as given (no wall clock read). */
double lr_retry_after(const char *value, double now);
double lr_rate_limit(const luaretry_header *headers, size_t count, double now);

void lr_quota_reset(lr_quota_pace *q);
/* The slot of an attempt that would start at `at` (guard clock) under
 * what the server said: the extra seconds to wait (0: at once), held
 * (*held = 1) with *seq its number for its answer; or, past the server's
 * window, the seconds after which to ask again (*held = 0; `u` in [0, 1)
 * spreads them); or -1, nothing taken, when it would come after `latest`
 * (< 0: no latest). */
double lr_quota_reserve(lr_shared *s, double at, double latest, double u, unsigned long long *seq,
                        int *held);
/* An answer's headers (`seq`: its attempt's number, 0 when it had none):
 * what they say of the quota, from `now` (guard clock).  1 when a field
 * was read, 0 when there was none, -1 when one was ignored (malformed, or
 * a reset past max_wait). */
int lr_quota_answer(lr_shared *s, const lr_guards *g, const luaretry_header *headers, size_t count,
                    unsigned long long seq, double now);

/* ---- the remote view: guards shared beyond this process (the fleet's,
 * through Redis), seen through a small interface so that the engine knows
 * nothing of where they live.  The policy plugs one into a load's rules;
 * each question answers 1, 0 or LR_REMOTE_LOCAL ("not known now: the
 * local guards decide").  The local guards count every outcome as well,
 * so they are warm whenever the remote view goes away.  `now` is the
 * call's clock, not the guards' (no guard_origin): a simulated fleet runs
 * on its virtual clock; the real one (Redis, the local store) is never
 * given a call on the virtual clock (policy/calls.c), so its `now` is
 * CLOCK_MONOTONIC's (Redis keeps its own). */

#define LR_REMOTE_LOCAL  (-1)
/* breaker_admits: admitted with one of the remote breaker's half-open
 * permits taken, which permit_give_back hands back when a later guard
 * refuses the attempt or its answer is a throttling one (neutral). */
#define LR_REMOTE_PERMIT 2

/* THROTTLED: a throttling answer, which costs the fleet what it costs the
 * local guards (lr_guards_throttled): budget.throttle_cost tokens; neutral
 * to the breaker (neither a failure nor the end of a run of them). */
typedef enum {
  LR_REMOTE_SUCCESS,
  LR_REMOTE_FAILURE,
  LR_REMOTE_ANSWERED,
  LR_REMOTE_THROTTLED
} lr_remote_outcome;

typedef struct {
  int (*budget_allows_retry)(void *ud, double now);
  /* A first attempt's may make one round trip (a half-open breaker's
   * probe permit), ending within `left` seconds (0: no deadline) and at
   * once when w is cancelled.  The chain (guard_breaker.c) asks with
   * first_attempt = 1 for every attempt, whatever its kind: in half-open
   * each takes a permit (LR_REMOTE_PERMIT says one was taken); after a
   * refusal it asks again with 0, which takes nothing and makes no round
   * trip, to tell an open circuit from a half-open one with no permit left
   * in its message. */
  int (*breaker_admits)(void *ud, int first_attempt, double now, double left, lr_waiter *w);
  /* Counts an outcome for the budget and the breaker.  Never waits. */
  void (*record)(void *ud, lr_remote_outcome o, double now);
  /* Before a retry, after its wait: brings the view up to date unless it
   * is recent (at most one bounded round trip; none while the remote side
   * is known to be down), ending within `left` seconds (0: no deadline)
   * and at once when the call's waiter is cancelled.  With `reserve` (a
   * retry the remote tokens refused before its wait) the same round trip
   * asks the remote reserve for this call: 1 a retry of it taken, 0 it is
   * spent; LR_REMOTE_LOCAL: not answered (no round trip, or the remote
   * tokens allowed the retry then), and `reserve_take` decides. */
  int (*refresh)(void *ud, double now, double left, lr_waiter *w, int reserve);
  /* The remote budget's tokens, for messages. */
  double (*tokens)(void *ud);
  /* ---- appended (a view may leave them NULL: the local guards decide) */
  /* The client-side throttle: counts one request (an attempt it is asked
   * about, refused or not, as the SRE book counts) and answers the
   * probability of refusing it from the remote counts before it, or
   * LR_REMOTE_LOCAL.  Accepts are counted by `throttle_accept`.  Never
   * waits. */
  double (*throttle_request)(void *ud, double now);
  /* The same probability without counting (for messages), or LR_REMOTE_LOCAL. */
  double (*throttle_refusal)(void *ud, double now);
  /* One budget token spent remotely as locally (lr_budget_spend).  Never
   * waits.  The engine no longer calls it: a hedge takes no token as it
   * goes (gRPC A6); kept for the views that implement it. */
  void (*spend)(void *ud, double now);
  /* The fleet's rate limiter: a token for an attempt that would start at
   * `at` (the call's clock, `now` being it now), no later than `latest`
   * (< 0: no deadline).  1: held, *wait the seconds from `at` until it
   * comes, or *wait < 0 (nothing held) when it would come after `latest`;
   * 0: none held, ask again *wait seconds after `at`; LR_REMOTE_LOCAL: the
   * local limiter decides.  May make one round trip (a block of tokens),
   * ending within `left` seconds (0: no deadline) and at once when w is
   * cancelled; `u` in [0, 1) spreads the asks of waiting processes.  NULL:
   * none (the local limiter). */
  int (*rate_reserve)(void *ud, double now, double at, double latest, double left, double u,
                      lr_waiter *w, double *wait);
  /* The breaker's rate rules (failure_rate, slow_call over a window of
   * outcomes): an outcome (failed: transient, not throttling; slow) into
   * the remote window, whose breaker opens when a rate is reached, as
   * lr_breaker_record's does.  Never waits.  NULL: the window stays this
   * process's (the local breaker still opens on it). */
  void (*breaker_record)(void *ud, int failed, int slow, double now);
  /* The budget's floor, the fleet's (lr_budget_reserve_take on the
   * fleet's reserve): 1 when a retry the fleet's tokens refuse may go, 0,
   * or LR_REMOTE_LOCAL.  Asked after the retry's wait when `refresh` did
   * not answer for it (it may make one round trip, ending within `left`
   * seconds, 0: no deadline, and at once when w is cancelled).  NULL: the
   * local reserve decides. */
  int (*reserve_take)(void *ud, double now, double left, lr_waiter *w);
  /* ---- what a later guard's refusal hands back (as the local guards'
   * lr_throttle_unrequest and lr_breaker_give_back): never waits, no
   * round trip.  NULL: nothing to hand back. */
  /* The request throttle_request counted at `now` (its `now`), uncounted. */
  void (*throttle_unrequest)(void *ud, double now);
  /* A half-open permit breaker_admits took (LR_REMOTE_PERMIT): a later
   * guard refused its attempt, or its answer was a throttling one. */
  void (*permit_give_back)(void *ud);
  /* The client-side throttle's accept: an attempt the service took (a
   * success or a final answer), counted where its request was (a
   * workflow's request, not its round, which `record` gives the budget
   * and the breaker).  Never waits.  NULL: none. */
  void (*throttle_accept)(void *ud, double now);
} lr_remote_ops;

/* LR_CALL_LAZY_PACE: the sends a simulated process keeps until its pace
 * is made (guard_rate.c). */
#define LR_LAZY_SENDS 3

typedef struct {
  const lr_remote_ops *ops; /* NULL: none */
  void *ud;
  /* LR_CALL_LAZY_PACE: where the view's process keeps the times of its
   * last LR_LAZY_SENDS sends until its pace is made (a simulated client,
   * held by the million: its call needs no cold block for them); NULL
   * for any other view */
  double *lazy_sent;
} lr_remote;

/* ---- lease.c: the fleet's rate limiter, one GCRA for every process
 * (README "Fleet").  Redis (core/fleet/redis_rate.c's script, the same
 * arithmetic in µs on Redis's clock) or a simulated fleet keeps the
 * theoretical arrival time; a process whose lease is empty leases a block
 * of the next tokens' times (slots) in one round trip, in the fleet's
 * order (FIFO: a busy fleet hands out later slots, up to a horizon, so a
 * process waits its turn instead of asking again and again), and spends
 * them locally, each at or after its time and at most LR_LEASE_LATE s
 * after it (later: dropped).  So over any T seconds the fleet's attempts
 * are at most limit * (T + LR_LEASE_LATE + the round trip) + burst,
 * whatever the number of processes or the size of their blocks; and a
 * process holds at most one block. */

#define LR_LEASE_MAX     64   /* slots a process holds at most */
#define LR_LEASE_HORIZON 10.0 /* seconds ahead the fleet hands slots out */
#define LR_LEASE_LATE    0.05 /* seconds after its time a slot may be spent */
#define LR_LEASE_BLOCK   0.1  /* a block is at most this much of the fleet's rate */
#define LR_LEASE_SPREAD  0.05 /* when none fit the horizon: asks spread this far */

typedef struct {
  double slot[LR_LEASE_MAX]; /* the times of the slots held, ascending */
  int head, count;
  int want;           /* the next block's size */
  long used, dropped; /* since the last block was asked for */
  double full_until;  /* the fleet had no slot in its horizon: asking
                         again before then would be a wasted round trip */
} lr_lease;

void lr_lease_init(lr_lease *l);
/* The fleet's side: up to `want` slots within `horizon` s of now from the
 * GCRA whose theoretical arrival time is *tat (advanced).  Slot j of the
 * grant comes at max(now, *b + j / limit).  Returns how many; none: *retry
 * is when one would fit (seconds from now). */
long lr_lease_grant(double *tat, double now, double limit, long burst, long want, double horizon,
                    double *b, double *retry);
/* How far ahead a call may take slots: LR_LEASE_HORIZON, or less when its
 * deadline (`latest` >= 0, `now` on the same clock) comes sooner. */
double lr_lease_horizon(double now, double latest);
/* A process's side: slot j (< n) of a grant at max(origin, b + j * interval). */
void lr_lease_add(lr_lease *l, long n, double origin, double b, double interval);
/* The slot for an attempt at `at`: 1 and *wait (from `at`), 0 when none is
 * held, -1 when the next comes after `latest` (>= 0; kept for others). */
int lr_lease_take(lr_lease *l, double at, double latest, double *wait);
/* The next block's size (1 to LR_LEASE_BLOCK of limit, at most
 * LR_LEASE_MAX and what is free): doubled when the last was all spent,
 * halved when slots of it were dropped unspent. */
long lr_lease_want(lr_lease *l, double limit);
/* After a grant of none at `now`: the fleet's next slot comes `retry` s
 * later; this process asks again once a block of `want` would fit. */
void lr_lease_full(lr_lease *l, double now, double retry, long want, double interval);
/* Whether a round trip now would be in vain: 1 and *wait (from `at`,
 * spread by u in [0, 1)) until it would not. */
int lr_lease_wait_full(const lr_lease *l, double now, double at, double u, double *wait);

/* ---- simfleet.c: a fleet on the virtual clock, for simulations: the
 * state Redis would hold is an lr_shared that the local guards' code
 * updates, and each client sees it as a process of the real fleet does:
 * its outcomes go in batches at most `sync` seconds apart, and its view
 * is the state at its last sync plus its own unsent counts. */

typedef struct lr_simfleet lr_simfleet;

/* NULL: out of memory.  Client i starts at (i / wave) * every seconds on
 * the fleet's clock (wave 0: all at 0); its call's clock starts at 0 then.
 * redis 0: the local store's model (no leases, no round trips counted). */
lr_simfleet *lr_simfleet_new(const lr_guards *g, double sync, long clients, long wave, double every,
                             int redis);
void lr_simfleet_free(lr_simfleet *s);
/* Client i's view, for lr_call_new; valid until lr_simfleet_free. */
const lr_remote *lr_simfleet_client(lr_simfleet *s, long i);
/* Client i's process starts (the command's first sync) and ends (what it
 * owes goes, its block given back), `now` on the fleet's clock. */
void lr_simfleet_begin(lr_simfleet *s, long i, double now);
void lr_simfleet_end(lr_simfleet *s, long i, double now);
/* The round trips the clients made, as processes count their Redis
 * commands (luaretry_metrics' fleet_round_trips); 0 for NULL. */
unsigned long long lr_simfleet_round_trips(const lr_simfleet *s);

/* ---- hedge.c: another attempt while one is slow (the policy's hedge) */

/* The latencies of a policy's recent answered attempts, for a hedge
 * delay of "pNN": a ring written by the calls of every thread (relaxed
 * atomics: a sample torn between two writers is still a latency), read
 * when a call's attempt starts.  Only calls of a policy with a percentile
 * hedge record into it, so no other decision writes these lines. */
#define LR_LATENCY_RING 256
#define LR_LATENCY_MIN  20 /* fewer samples: the ceiling */
typedef struct {
  _Alignas(64) atomic_ullong next;                 /* samples recorded, ever */
  _Alignas(64) atomic_uint ms100[LR_LATENCY_RING]; /* 0.1 ms units */
} lr_latency;

typedef struct {
  int max;               /* hedges in flight at once; 0: no hedging */
  double delay;          /* seconds after an attempt's start */
  double percentile;     /* > 0: the delay is this percentile of the
                               policy's recent attempts */
  double floor, ceiling; /* a percentile's bounds */
  lr_latency *latency;   /* the policy's samples (with a percentile) */
  double share;          /* hedging's own bound: at most this share of the
                            policy's recent calls hedge ("The Tail at Scale") */
} lr_hedge;

/* Hedging's bound as credit (Finagle's RetryBudget's shape): each call of
 * a hedging policy adds `share` of a hedge, each hedge takes one, and the
 * credit holds at most LR_HEDGE_RESERVE hedges (also where it starts), so
 * over any run of calls at most share * calls + LR_HEDGE_RESERVE hedge. */
#define LR_HEDGE_RESERVE 10

void lr_latency_record(lr_latency *l, double seconds);
/* The delay hedge h gives now: its fixed delay, or its percentile of the
 * recent samples within [floor, ceiling] (the ceiling until there are
 * LR_LATENCY_MIN of them). */
double lr_latency_delay(const lr_hedge *h);
/* guard.c: hedging's credit (LR_HEDGE_RESERVE): a call adds `share`
 * (lr_hedge_credit), a hedge takes one (1: taken), a hedge refused later in
 * the chain gives it back (lr_hedge_refund). */
void lr_hedge_credit(lr_shared *s, double share);
int lr_hedge_take(lr_shared *s);
void lr_hedge_refund(lr_shared *s);
/* One budget token spent (the simulated fleet's `spend`, kept for the
 * fleet's views: the engine no longer pays for a hedge as it is sent). */
void lr_budget_spend(lr_shared *s, const lr_guards *g);

/* ---- the rules a call follows, produced by the policy */

typedef struct {
  long max_attempts;      /* 0: none */
  double deadline;        /* 0: none */
  double attempt_timeout; /* 0: none */
  double connect_timeout; /* 0: none */
  double stall_timeout;   /* 0: none */
  long stall_speed;
  int retry_after;
  double max_retry_after;
  char attempt_header[64]; /* "": none; else sent with the attempt number */
  /* propagate: headers sent with each attempt ("": none): the attempt's
   * timeout in ms, and the retries the next service may make */
  char propagate_deadline[64], propagate_retries[64];
  lr_backoff backoff;
  lr_backoff throttle_backoff; /* after an outcome judged throttling */
  lr_guards guards;            /* installed into the policy's lr_shared */
  lr_hedge hedge;              /* hedge.max == 0: none */
  lr_remote remote;            /* the load's fleet, if any: it lives as long as
                               the load (and so as the load's calls) */
} lr_rules;

/* The policy's judgement, as the state machine sees it: plain callbacks. */
typedef struct {
  luaretry_class cls;
  double wait;       /* >= 0: the script chose the wait */
  int jitter;        /* spread `wait` upward by the policy's jitter */
  int server;        /* `wait` is the server's: as a Retry-After */
  int reason;        /* a final verdict's reason is in message */
  int throttled;     /* transient, and the service throttling */
  const char *rule;  /* static or owned by the policy */
  char message[512]; /* for LUARETRY_CLASS_ERROR */
} lr_verdict;

/* What the script side keeps for one call between its decisions; the
 * engine only frees it (free()) when the call ends. */
typedef struct {
  char *blob; /* info.call, serialized between decisions */
  size_t blob_len;
  void *prepared; /* prepare()'s copy of the request, one block */
  void *headers;  /* the headers with attempt_header's, one block */
} lr_call_data;

/* The call a judgement is for. */
typedef struct {
  int attempt;
  double elapsed;
  lr_rng *rng;         /* the call's own stream: a script's math.random */
  lr_call_data *data;  /* NULL until the call keeps something: lr_attempt_data */
  int hedge;           /* the attempt is a hedge: info.hedge */
  luaretry_call *call; /* for its invocation id */
  int request;         /* a workflow's request (LUARETRY_CALL_WORKFLOW_REQUEST):
                          the script made it, prepare() is not run on it */
} lr_attempt_ctx;

/* The call's script-side data to write to: ctx->data, or the call's own
 * made on first use (a call that keeps nothing between its decisions holds
 * none); NULL when out of memory. */
lr_call_data *lr_attempt_data(const lr_attempt_ctx *ctx);

/* The policy's judgement, as the state machine sees it: plain callbacks,
 * `ud` the policy's (one load of its script).  Errors go into err. */
typedef struct {
  void *ud;
  void (*classify)(void *ud, const luaretry_outcome *o, const lr_attempt_ctx *ctx, lr_verdict *v);
  /* For LUARETRY_BACKOFF_SCRIPT: 0 and *wait, or -1 and v->message. */
  int (*backoff)(void *ud, const lr_attempt_ctx *ctx, long n, double previous, double *wait,
                 lr_verdict *v);
  /* Optional: 0, or -1 with the hook's error in err (the decision stands). */
  int (*on_retry)(void *ud, const luaretry_outcome *o, const luaretry_decision *d,
                  const lr_attempt_ctx *ctx, char *err, size_t errlen);
  /* The script's is_idempotent(request) and prepare(request, attempt). */
  luaretry_code (*is_idempotent)(void *ud, const luaretry_request *r, int *yes,
                                 const lr_attempt_ctx *ctx, char *err, size_t errlen);
  luaretry_code (*prepare)(void *ud, const luaretry_request *in, int attempt, luaretry_request *out,
                           const lr_attempt_ctx *ctx, char *err, size_t errlen);
  /* The call is over: what it held of ud is given back. */
  void (*release)(void *ud);
} lr_judge;

/* ---- call*.c: the state machine (call_internal.h says which file does what) */

/* A call judged by `j` under `rules` (both must outlive it: the judge's
 * release says when they may go), sharing `shared` (the policy's guards
 * and counters), or with guards of its own when the options say
 * LUARETRY_CALL_ISOLATED.  `remote` (NULL: none) is asked before the
 * local guards: the caller chooses it (never the fleet for a call on the
 * virtual clock; a simulated fleet for a simulation) and it must outlive
 * the call.  `max_attempts` > 0 overrides the rules'.  On failure the
 * judge is released. */
luaretry_code lr_call_new(const lr_judge *j, const lr_rules *rules, long max_attempts,
                          lr_shared *shared, const lr_remote *remote,
                          const luaretry_call_options *o, luaretry_call **out);
/* A call on the virtual clock whose guards see its clock from `origin`
 * (the guards' time of its start) instead of the real time at its begin:
 * simulated calls one after another stay on one timeline (a rate limiter
 * refills between them). */
void lr_call_guard_origin(luaretry_call *c, double origin);
/* An option flag of lr_call_new's alone (beside luaretry.h's): a
 * simulated process's call (luaretry_simulate_herd's fleet) whose adaptive
 * rate is its own, made on its first answer that counts (guard_rate.c):
 * a million clients hold no pace until they need one.  Until then its
 * sends are kept in remote->lazy_sent; without that the flag is ignored. */
#define LR_CALL_LAZY_PACE 0x80000000u

/* Report with a forced class (simulate): the judge still runs, for a wait
 * of its choosing and for its errors. */
luaretry_code lr_call_report_class(luaretry_call *c, const luaretry_outcome *o,
                                   luaretry_class forced, luaretry_decision *d);

/* ---- propagation (call_allowance.c): what an attempt tells the next service.
 * The milliseconds it is waited for (-1: no bound), and the retries the
 * next service may make: 0 while this call retries itself (one layer
 * retries), else what its own caller allowed (-1: nothing to pass). */
long long lr_call_pass_timeout_ms(const luaretry_call *c);
long lr_call_pass_retries(const luaretry_call *c);

/* call_run.c: the call whose operation luaretry_call_run runs on this
 * thread now (NULL: none): a workflow's run() watches its cancel. */
extern _Thread_local luaretry_call *lr_operation_call;

/* ---- util.c */

/* Copy and format with truncation, always terminated: messages are cut,
 * never overflowed. */
void lr_strlcpy(char *dst, const char *src, size_t size);
/* src with its control bytes as \xHH (a message is one line, and a file
 * name's ESC must not drive the reader's terminal); cut to size. */
void lr_escape_controls(char *dst, size_t size, const char *src);
void lr_fmt(char *dst, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A helper thread of the library's (the watchdog, the fleet's worker, an
 * in-process fault server), made with every signal blocked: a signal sent
 * to the process reaches a thread of the host's (one whose blocking read
 * it must cut, or that waits for it in sigwait).  pthread_create's answer. */
int lr_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg);

#endif
