/* guard.c: what all calls of one policy share in a process: the retry
 * budget (gRPC's retry throttling), the circuit breaker and the counters.
 * Plain C and atomics only: any number of threads update them without a
 * lock, and neither Lua nor HTTP is known here.  The settings come from
 * each call's rules (so a reload never changes them under a running
 * call), and time from each call's clock (so a breaker on virtual time
 * opens and closes on virtual time). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

#define MILLI 1000 /* tokens in thousandths: gRPC's ratio has 3 decimals */

static long long to_ns(double seconds);

/* llround(x * MILLI), inline: on every retry and every outcome a call into
 * libm cost as much as the rest of the budget's arithmetic.  The same
 * result: x - trunc(x) is exact for any double, so halves round away from
 * zero as llround's do; out of range (or NaN) llround itself decides. */
static inline long long milli(double x) {
  double r = x * MILLI;
  if (!(r > -9e18 && r < 9e18)) return llround(r);
  long long i = (long long)r;
  double f = r - (double)i;
  return f >= 0.5 ? i + 1 : f <= -0.5 ? i - 1 : i;
}

void lr_guards_prepare(lr_guards *g) {
  g->milli_max = milli(g->max_tokens);
  g->milli_ratio = milli(g->token_ratio);
  g->milli_throttle = milli(g->throttle_cost);
}

void lr_shared_init(lr_shared *s, const lr_guards *g) {
  memset(s, 0, sizeof *s);
  s->guards = *g;
  atomic_init(&s->milli_tokens, (long long)llround(g->max_tokens * MILLI));
  atomic_init(&s->milli_max, (long long)llround(g->max_tokens * MILLI));
  atomic_init(&s->hedge_milli, (long long)LR_HEDGE_RESERVE * MILLI);
  atomic_init(&s->reserve_tat_ns, LLONG_MIN / 2);
  atomic_init(&s->breaker_state, LUARETRY_BREAKER_CLOSED);
  for (int k = 0; k < LR_STRIPES; k++)
    for (int i = 0; i <= LR_BUDGET_PENDING; i++) atomic_init(&s->stripes[k].v[i], 0);
  atomic_init(&s->consecutive_failures, 0);
  atomic_init(&s->opened_at_ns, 0);
  atomic_init(&s->probes_left, 0);
  atomic_flag_clear(&s->window_lock);
  lr_pace_init(&s->pace);
}

static int same_guards(const lr_guards *a, const lr_guards *b) {
  if (a->reserve != b->reserve) return 0;
  return a->budget == b->budget && a->max_tokens == b->max_tokens &&
         a->token_ratio == b->token_ratio && a->throttle_cost == b->throttle_cost &&
         a->breaker == b->breaker && a->failures == b->failures &&
         a->open_seconds == b->open_seconds && a->probes == b->probes &&
         a->failure_rate == b->failure_rate && a->slow_seconds == b->slow_seconds &&
         a->slow_rate == b->slow_rate && a->window == b->window && a->min_calls == b->min_calls &&
         a->throttle_k == b->throttle_k && a->throttle_window == b->throttle_window &&
         a->rate == b->rate && a->rate_adaptive == b->rate_adaptive &&
         a->rate_limit == b->rate_limit && a->rate_burst == b->rate_burst &&
         a->rate_headers == b->rate_headers && a->rate_headers_max_wait == b->rate_headers_max_wait;
}

static void window_clear(lr_shared *s) {
  lr_lock(&s->window_lock);
  s->window_len = s->window_pos = s->window_failed = s->window_slow = 0;
  lr_unlock(&s->window_lock);
}

void lr_shared_configure(lr_shared *s, const lr_guards *g) {
  if (same_guards(&s->guards, g)) return;
  s->guards = *g;
  atomic_store(&s->milli_max, (long long)llround(g->max_tokens * MILLI));
  atomic_store(&s->milli_tokens, (long long)llround(g->max_tokens * MILLI));
  for (int k = 0; k < LR_STRIPES; k++) atomic_store(&s->stripes[k].v[LR_BUDGET_PENDING], 0);
  atomic_store(&s->reserve_tat_ns, LLONG_MIN / 2);
  atomic_store(&s->breaker_state, LUARETRY_BREAKER_CLOSED);
  atomic_store(&s->consecutive_failures, 0);
  window_clear(s);
  lr_pace_reset(&s->pace);
}

void lr_count(lr_shared *s, int metric, long long n) { lr_count_in(s, lr_stripe_now(), metric, n); }

long long lr_counted(const lr_shared *s, int metric) {
  long long sum = 0;
  for (int k = 0; k < LR_STRIPES; k++) {
    long long v =
      atomic_load_explicit(&((lr_shared *)s)->stripes[k].v[metric], memory_order_relaxed);
    sum = v > 0 && sum > LLONG_MAX - v ? LLONG_MAX : sum + v; /* as lr_count: saturated */
  }
  return sum;
}

/* ---- the budget: -1 token per failed attempt, +token_ratio per success,
 * retries only while more than half the tokens are left */

static void add_tokens(lr_shared *s, const lr_guards *g, long long delta) {
  long long max = g->milli_max;
  long long cur = atomic_load(&s->milli_tokens), next;
  do {
    next = cur + delta;
    if (next < 0) next = 0;
    if (next > max) next = max;
    /* a success on a full budget changes nothing: no write, so threads
     * that share the policy do not pass the line back and forth */
    if (next == cur) return;
  } while (!atomic_compare_exchange_weak(&s->milli_tokens, &cur, next));
}

/* A success's share goes to its thread's stripe, and a whole token's
 * worth into the count at once; a failure brings its thread's in first.
 * Added up (at most max), the count and the stripes are what one count
 * would hold: the same for one thread, exactly (a sum of shares clamped
 * once is the shares clamped one by one); and two threads whose calls
 * succeed at once no longer pass the count's line back and forth. */
static atomic_llong *pending_of(lr_shared *s, int k) {
  return &s->stripes[lr_stripe_index(k)].v[LR_BUDGET_PENDING];
}

static inline void bring_in(lr_shared *s, const lr_guards *g, int k) {
  atomic_llong *v = pending_of(s, k);
  long long x;
  if (k > 0) { /* the thread's own stripe */
    x = atomic_load_explicit(v, memory_order_relaxed);
    if (x) atomic_store_explicit(v, 0, memory_order_relaxed);
  } else {
    x = atomic_exchange(v, 0);
  }
  if (x) add_tokens(s, g, x);
}

/* Read without the lock a reload writes s->guards under: its own atomic. */
static long long milli_max_of(lr_shared *s) { return atomic_load(&s->milli_max); }

static long long budget_milli(lr_shared *s, long long max) {
  long long t = atomic_load(&s->milli_tokens);
  for (int k = 0; k < LR_STRIPES; k++)
    t += atomic_load_explicit(&s->stripes[k].v[LR_BUDGET_PENDING], memory_order_relaxed);
  return t > max ? max : t;
}

long long lr_budget_milli(lr_shared *s) { return budget_milli(s, milli_max_of(s)); }

/* lr_budget_allows_retry when the count alone is not enough. */
int lr_budget_allows_summed(lr_shared *s, const lr_guards *g) {
  return budget_milli(s, g->milli_max) * 2 > g->milli_max;
}

double lr_budget_tokens(lr_shared *s) { return (double)lr_budget_milli(s) / MILLI; }

/* ---- the budget's floor (Finagle's RetryBudget: a share of requests, the
 * tokens above, plus a reserve of retries per second): a token bucket of
 * `reserve` per second holding LR_RESERVE_SPAN seconds of them, as a GCRA
 * whose state is the moment it was last empty (tat).  Full: tat at or
 * before now - SPAN; a retry takes 1 / reserve seconds of it.  So a lone
 * call (50 s of the shipped 0.1 a second hold 5 retries, what a call of 10
 * attempts needs beyond the tokens' 4) makes all its attempts however
 * short its waits, while a batch in an outage adds at most 5 + 0.1 a
 * second to what the tokens allow, however many calls it holds.  Finagle
 * holds 10 s (its TTL) of a reserve of 10 a second, sized for servers of
 * many requests; a client's lone call needs the few retries held, not the
 * rate, and a fleet of 100 such calls must stay within 1.1. */

int lr_reserve_gcra(double *tat, double reserve, double now) {
  if (!(reserve > 0)) return 0;
  double t = *tat < now - LR_RESERVE_SPAN ? now - LR_RESERVE_SPAN : *tat;
  if (now - t + 1e-6 < 1 / reserve) return 0; /* a µs: the ns it is kept in round */
  *tat = t + 1 / reserve;
  return 1;
}

int lr_budget_reserve_take(lr_shared *s, const lr_guards *g, double now) {
  if (!g->budget || !(g->reserve > 0)) return 0;
  long long cur = atomic_load(&s->reserve_tat_ns), next;
  do {
    double tat = cur == LLONG_MIN / 2 ? now - LR_RESERVE_SPAN : (double)cur * 1e-9;
    if (!lr_reserve_gcra(&tat, g->reserve, now)) return 0;
    next = to_ns(tat);
  } while (!atomic_compare_exchange_weak(&s->reserve_tat_ns, &cur, next));
  return 1;
}

/* ---- the breaker: closed -> open after `failures` transient failures in
 * a row; open for `open_seconds`, refusing every call; then half-open,
 * letting `probes` calls through: a success closes it, a failure opens it
 * again. */

/* Seconds as stored: nanoseconds, clamped so any clock value fits. */
static long long to_ns(double seconds) {
  if (!(seconds > -9e9)) return (long long)-9e18;
  if (seconds > 9e9) return (long long)9e18;
  return (long long)(seconds * 1e9);
}

static void change(lr_shared *s, const lr_guards *g, luaretry_breaker_state from,
                   luaretry_breaker_state to, double now) {
  int expected = (int)from;
  /* a compare-and-swap takes the line even when it fails: every success
   * would (half-open to closed) on a closed breaker */
  if (atomic_load_explicit(&s->breaker_state, memory_order_relaxed) != expected ||
      !atomic_compare_exchange_strong(&s->breaker_state, &expected, (int)to))
    return;
  if (to == LUARETRY_BREAKER_OPEN) {
    atomic_store(&s->opened_at_ns, to_ns(now));
    lr_count(s, LR_M_BREAKER_OPENINGS, 1);
  }
  if (to == LUARETRY_BREAKER_HALF_OPEN) {
    atomic_store(&s->probes_left, g->probes);
    atomic_store(&s->opened_at_ns, to_ns(now));
  }
  if (to == LUARETRY_BREAKER_CLOSED) atomic_store(&s->consecutive_failures, 0);
  /* each state starts its rates afresh (resilience4j's rule too): a
   * circuit just closed is not judged on what opened it */
  if (to == LUARETRY_BREAKER_CLOSED || to == LUARETRY_BREAKER_OPEN) window_clear(s);
  if (s->on_change) s->on_change(s->on_change_ud, to);
}

/* Whether an attempt may go now; in half-open every attempt takes a
 * permit (*permit = 1).  Probes that never told (cancelled, a policy
 * error) are given another chance after open_seconds. */
int lr_breaker_permit(lr_shared *s, const lr_guards *g, double now, int *permit) {
  *permit = 0;
  if (!g->breaker) return 1;
  int state = atomic_load(&s->breaker_state);
  if (state == LUARETRY_BREAKER_OPEN) {
    double opened = (double)atomic_load(&s->opened_at_ns) * 1e-9;
    if (now - opened < g->open_seconds) return 0;
    change(s, g, LUARETRY_BREAKER_OPEN, LUARETRY_BREAKER_HALF_OPEN, now);
    state = atomic_load(&s->breaker_state);
  }
  if (state != LUARETRY_BREAKER_HALF_OPEN) return state != LUARETRY_BREAKER_OPEN;
  int left = atomic_load(&s->probes_left);
  while (left > 0 && !atomic_compare_exchange_weak(&s->probes_left, &left, left - 1)) {
  }
  if (left > 0) return *permit = 1;
  double since = (double)atomic_load(&s->opened_at_ns) * 1e-9;
  if (now - since < g->open_seconds) return 0;
  atomic_store(&s->opened_at_ns, to_ns(now));
  atomic_store(&s->probes_left, g->probes - 1);
  return *permit = 1;
}

/* The fleet's simulated view asks as before: a first attempt takes a
 * permit, a later one only needs the circuit not open. */
int lr_breaker_admits(lr_shared *s, const lr_guards *g, int first_attempt, double now) {
  int permit;
  if (first_attempt || atomic_load(&s->breaker_state) != LUARETRY_BREAKER_HALF_OPEN)
    return lr_breaker_permit(s, g, now, &permit);
  return 1;
}

void lr_breaker_give_back(lr_shared *s, const lr_guards *g) {
  if (!g->breaker || atomic_load(&s->breaker_state) != LUARETRY_BREAKER_HALF_OPEN) return;
  int left = atomic_load(&s->probes_left);
  while (left < g->probes && !atomic_compare_exchange_weak(&s->probes_left, &left, left + 1)) {
  }
}

void lr_breaker_success(lr_shared *s, const lr_guards *g, double now) {
  if (!g->breaker) return;
  /* written only when not 0 already: threads that share the policy do
   * not pass the line back and forth on every success */
  if (atomic_load_explicit(&s->consecutive_failures, memory_order_relaxed) != 0)
    atomic_store(&s->consecutive_failures, 0);
  change(s, g, LUARETRY_BREAKER_HALF_OPEN, LUARETRY_BREAKER_CLOSED, now);
}

void lr_breaker_failure(lr_shared *s, const lr_guards *g, double now) {
  if (!g->breaker) return;
  int n = atomic_fetch_add(&s->consecutive_failures, 1) + 1;
  if (atomic_load(&s->breaker_state) == LUARETRY_BREAKER_HALF_OPEN)
    change(s, g, LUARETRY_BREAKER_HALF_OPEN, LUARETRY_BREAKER_OPEN, now);
  else if (n >= g->failures)
    change(s, g, LUARETRY_BREAKER_CLOSED, LUARETRY_BREAKER_OPEN, now);
}

/* The budget counts only successes and failures (as gRPC's), throttling
 * at its own cost; hedges pay nothing as they go (gRPC A6). */
void lr_budget_success(lr_shared *s, const lr_guards *g) {
  if (!g->budget) return;
  int k = lr_stripe_now();
  atomic_llong *v = pending_of(s, k);
  long long mine = atomic_load_explicit(v, memory_order_relaxed);
  /* a success on a full budget changes nothing: no write */
  if (mine == 0 && atomic_load_explicit(&s->milli_tokens, memory_order_relaxed) >= g->milli_max)
    return;
  if (k > 0)
    atomic_store_explicit(v, mine += g->milli_ratio, memory_order_relaxed);
  else
    mine = atomic_fetch_add(v, g->milli_ratio) + g->milli_ratio;
  if (mine >= MILLI) bring_in(s, g, k);
}

void lr_budget_failure(lr_shared *s, const lr_guards *g) {
  if (!g->budget) return;
  bring_in(s, g, lr_stripe_now());
  add_tokens(s, g, -MILLI);
}

void lr_budget_throttled(lr_shared *s, const lr_guards *g) {
  if (!g->budget) return;
  bring_in(s, g, lr_stripe_now());
  add_tokens(s, g, -g->milli_throttle);
}

void lr_guards_success(lr_shared *s, const lr_guards *g, double now) {
  lr_budget_success(s, g);
  lr_breaker_success(s, g, now);
}

/* An outcome judged final: the service answered; the breaker takes an
 * answer as a sign of life. */
void lr_guards_answered(lr_shared *s, const lr_guards *g, double now) {
  lr_breaker_success(s, g, now);
}

void lr_guards_failure(lr_shared *s, const lr_guards *g, double now) {
  lr_budget_failure(s, g);
  lr_breaker_failure(s, g, now);
}

void lr_budget_spend(lr_shared *s, const lr_guards *g) {
  if (g->budget) add_tokens(s, g, -MILLI);
}

/* Neutral to the breaker: a 429 says the service is alive but busy, which
 * is neither a failure (20 in a row must not open it) nor a success (one
 * must not close a half-open breaker, nor reset the count). */
void lr_guards_throttled(lr_shared *s, const lr_guards *g, double now) {
  (void)now;
  lr_budget_throttled(s, g);
  lr_breaker_give_back(s, g);
}

/* ---- hedging's bound: credit in thousandths of a hedge */

void lr_hedge_credit(lr_shared *s, double share) {
  long long add = milli(share), max = (long long)LR_HEDGE_RESERVE * MILLI;
  long long cur = atomic_load(&s->hedge_milli), next;
  do {
    next = cur + add > max ? max : cur + add;
  } while (next != cur && !atomic_compare_exchange_weak(&s->hedge_milli, &cur, next));
}

int lr_hedge_take(lr_shared *s) {
  long long cur = atomic_load(&s->hedge_milli);
  while (cur >= MILLI && !atomic_compare_exchange_weak(&s->hedge_milli, &cur, cur - MILLI)) {
  }
  return cur >= MILLI;
}

void lr_hedge_refund(lr_shared *s) { atomic_fetch_add(&s->hedge_milli, MILLI); }

/* ---- the rate rules: a count-based sliding window of outcomes */

int lr_breaker_rated(const lr_guards *g) {
  return g->breaker && g->window > 0 && (g->failure_rate > 0 || g->slow_rate > 0);
}

int lr_breaker_record(lr_shared *s, const lr_guards *g, int failed, int slow, double now) {
  if (!lr_breaker_rated(g)) return 0;
  if (atomic_load(&s->breaker_state) != LUARETRY_BREAKER_CLOSED) return 0;
  int window = g->window < LR_WINDOW_MAX ? g->window : LR_WINDOW_MAX;
  unsigned char bits = (unsigned char)((failed ? 1 : 0) | (slow ? 2 : 0));
  lr_lock(&s->window_lock);
  if (s->window_pos >= window) s->window_pos = 0; /* a smaller window after a reload */
  if (s->window_len >= window) {
    unsigned char old = s->window_ring[s->window_pos];
    s->window_failed -= old & 1;
    s->window_slow -= (old >> 1) & 1;
  } else {
    s->window_len++;
  }
  s->window_ring[s->window_pos] = bits;
  s->window_pos = (s->window_pos + 1) % window;
  s->window_failed += bits & 1;
  s->window_slow += (bits >> 1) & 1;
  int n = s->window_len, open = 0;
  if (n >= g->min_calls) {
    open = (g->failure_rate > 0 && s->window_failed >= g->failure_rate * n) ||
           (g->slow_rate > 0 && s->window_slow >= g->slow_rate * n);
  }
  lr_unlock(&s->window_lock);
  if (!open) return 0;
  change(s, g, LUARETRY_BREAKER_CLOSED, LUARETRY_BREAKER_OPEN, now);
  return 1;
}
