/* local_guard.c: the local store as the engine sees it, a remote view of
 * the guards (lr_remote_ops), with the rules of engine/guard.c and
 * engine/pace.c applied to the counts in the mapped file.  Each update is
 * one compare-and-swap of one word (local_store.h: crash-safe), and none
 * waits: there is no round trip, so `refresh` has nothing to do.
 *
 * A success writes only what it changes: nothing when the budget is full
 * and the breaker closed with no failure in its run (what a success
 * always writes: the admission window's accepts, which no failure
 * touches, and with rate rules its outcome in the breaker's window).
 * Times are the call's clock, CLOCK_MONOTONIC, the same for every process
 * of the machine: a call on the virtual clock is never given the store
 * (policy/calls.c; test_fleet_local's test_virtual_calls_stay_out). */
#include <math.h>
#include <string.h>

#include "local_store.h"

#define MILLI 1000

/* The breaker's word: state (2 bits, luaretry_breaker_state's values),
 * the failures in a row (16, saturated), the probe permits left (14) and
 * when it opened or went half-open (32: centiseconds of CLOCK_MONOTONIC,
 * compared modulo 2^32). */
#define FAILS_MAX  0xffffull
#define PROBES_MAX 0x3fffull

static uint64_t pack(unsigned state, uint64_t fails, uint64_t probes, uint32_t at) {
  if (fails > FAILS_MAX) fails = FAILS_MAX;
  if (probes > PROBES_MAX) probes = PROBES_MAX;
  return (uint64_t)state | fails << 2 | probes << 18 | (uint64_t)at << 32;
}
static unsigned state_of(uint64_t w) { return (unsigned)(w & 3); }
static uint64_t fails_of(uint64_t w) { return w >> 2 & FAILS_MAX; }
static uint64_t probes_of(uint64_t w) { return w >> 18 & PROBES_MAX; }
static uint32_t at_of(uint64_t w) { return (uint32_t)(w >> 32); }
static uint32_t cs(double now) { return (uint32_t)(uint64_t)(now * 100); }
/* centiseconds since the word's time, modulo 2^32 */
static double since(uint64_t w, double now) { return (double)(uint32_t)(cs(now) - at_of(w)) / 100; }

/* A refused store, told once (then the local guards decide quietly). */
__attribute__((noinline)) static void say_refused(lr_local *l) {
  if (atomic_exchange(&l->said, 1) || !l->log) return;
  char line[800];
  lr_fmt(line, sizeof line, "fleet guards (local): %s; local guards decide", l->detail);
  l->log(l->log_ud, line);
}

static void rate_adopt(lr_local *l, lr_local_file *m);

/* The file, when this guard is on and the store is usable with this
 * process's settings (local_settings.c: one load and compare, unless they
 * differ). */
static lr_local_file *map_of(lr_local *l, atomic_int *guard) {
  if (!l || !atomic_load_explicit(guard, memory_order_relaxed)) return NULL;
  lr_local_file *m = l->map;
  if (!m) return say_refused(l), NULL;
  if (atomic_load_explicit(&m->cfg_hash, memory_order_relaxed) !=
      atomic_load_explicit(&l->cfg_hash, memory_order_relaxed)) {
    int claimed = lr_local_settings_claim(l);
    if (claimed == 2) rate_adopt(l, m); /* ours took the store over */
    return claimed ? m : NULL;
  }
  return m;
}

/* ---- the budget */

static long long tokens_of(long long t, long long max) { return t < 0 || t > max ? max : t; }

static void add_tokens(lr_local *l, long long delta) {
  lr_local_file *m = map_of(l, &l->budget);
  if (!m) return;
  long long max = atomic_load_explicit(&l->max_milli, memory_order_relaxed);
  long long cur = atomic_load(&m->tokens), next;
  do {
    long long have = tokens_of(cur, max);
    next = have + delta < 0 ? 0 : have + delta > max ? max : have + delta;
    if (next == have) return; /* full, or empty: nothing written */
  } while (!atomic_compare_exchange_weak(&m->tokens, &cur, next));
}

static int budget_allows_retry(void *ud, double now) {
  (void)now;
  lr_local *l = ud;
  lr_local_file *m = map_of(l, &l->budget);
  if (!m) return LR_REMOTE_LOCAL;
  long long max = atomic_load_explicit(&l->max_milli, memory_order_relaxed);
  return tokens_of(atomic_load(&m->tokens), max) * 2 > max;
}

static double tokens(void *ud) {
  lr_local *l = ud;
  lr_local_file *m = map_of(l, &l->budget);
  long long max = atomic_load(&l->max_milli);
  return m ? (double)tokens_of(atomic_load(&m->tokens), max) / MILLI : 0;
}

static void spend(void *ud, double now) {
  (void)now;
  add_tokens(ud, -MILLI);
}

/* The budget's floor, the machine's: one reserve for every process of
 * the store (engine/guard.c's GCRA on the file's word, in µs), so that its
 * lone calls make their attempts while 100 of them add what one would. */
static int reserve_take(void *ud, double now, double left, lr_waiter *w) {
  (void)left, (void)w; /* no round trip */
  lr_local *l = ud;
  lr_local_file *m = map_of(l, &l->budget);
  double reserve = (double)atomic_load_explicit(&l->reserve_milli, memory_order_relaxed) / MILLI;
  if (!m || !(reserve > 0)) return LR_REMOTE_LOCAL;
  long long cur = atomic_load(&m->reserve_tat_us), next;
  do {
    double tat = (double)cur / 1e6;
    if (!lr_reserve_gcra(&tat, reserve, now)) return 0;
    next = llround(tat * 1e6);
  } while (!atomic_compare_exchange_weak(&m->reserve_tat_us, &cur, next));
  return 1;
}

/* ---- the breaker */

/* The rate window starts afresh at each opening and closing (guard.c's
 * rule: a circuit just closed is not judged on what opened it). */
static void window_restart(lr_local_file *m) {
  atomic_store(&m->window_from, atomic_load(&m->outcomes));
}

/* A success or an answer: the run ends, a half-open breaker closes. */
static void breaker_answered(lr_local *l, double now) {
  lr_local_file *m = map_of(l, &l->breaker);
  if (!m) return;
  unsigned long long w = atomic_load(&m->breaker), next;
  do {
    unsigned s = state_of(w);
    if (s != LUARETRY_BREAKER_HALF_OPEN && fails_of(w) == 0) return;
    /* the run ends; open stays open (its period runs on), half-open closes */
    if (s == LUARETRY_BREAKER_OPEN)
      next = pack(s, 0, probes_of(w), at_of(w));
    else
      next =
        pack(LUARETRY_BREAKER_CLOSED, 0, 0, s == LUARETRY_BREAKER_HALF_OPEN ? cs(now) : at_of(w));
  } while (!atomic_compare_exchange_weak(&m->breaker, &w, next));
  if (state_of(w) == LUARETRY_BREAKER_HALF_OPEN) window_restart(m);
}

static void breaker_failed(lr_local *l, double now) {
  lr_local_file *m = map_of(l, &l->breaker);
  if (!m) return;
  uint64_t failures = (uint64_t)atomic_load(&l->failures);
  if (failures > FAILS_MAX) failures = FAILS_MAX;
  unsigned long long w = atomic_load(&m->breaker), next;
  do {
    unsigned s = state_of(w);
    uint64_t n = fails_of(w) + 1;
    if (s == LUARETRY_BREAKER_HALF_OPEN || (s == LUARETRY_BREAKER_CLOSED && n >= failures))
      next = pack(LUARETRY_BREAKER_OPEN, n, 0, cs(now));
    else
      next = pack(s, n, probes_of(w), at_of(w));
  } while (!atomic_compare_exchange_weak(&m->breaker, &w, next));
  if (state_of(next) == LUARETRY_BREAKER_OPEN && state_of(w) != LUARETRY_BREAKER_OPEN)
    window_restart(m);
}

/* ---- the breaker's rate rules: the last `window` outcomes of every
 * process, in LR_LOCAL_BLOCKS blocks of ceil(window / LR_LOCAL_BLOCKS)
 * outcomes, each one word: its number (the outcome's number over the
 * block's size, 28 bits), its outcomes, failures and slow ones (12 bits
 * each).  So the window moves by a block at a time: it holds the last
 * `window` outcomes and up to a block more. */

#define BLOCK_BITS 12
#define BLOCK_MAX  ((1ull << BLOCK_BITS) - 1)
#define EPOCH_MASK ((1ull << 28) - 1)

static uint64_t block_of(uint64_t epoch, uint64_t n, uint64_t failed, uint64_t slow) {
  return (epoch & EPOCH_MASK) << 36 | n << 24 | failed << 12 | slow;
}

/* The window's outcomes, failures and slow ones: the blocks within the
 * last `window` outcomes up to block `epoch`, none from before the window
 * last started afresh. */
static void window_sum(lr_local_file *m, uint64_t epoch, uint64_t size, uint64_t window,
                       uint64_t sum[3]) {
  uint64_t from = (atomic_load(&m->window_from) / size) & EPOCH_MASK;
  uint64_t blocks = (window + size - 1) / size;
  sum[0] = sum[1] = sum[2] = 0;
  for (int i = 0; i < LR_LOCAL_BLOCKS; i++) {
    uint64_t x = atomic_load(&m->blocks[i]), e = x >> 36;
    if (((epoch - e) & EPOCH_MASK) >= blocks || ((e - from) & EPOCH_MASK) > EPOCH_MASK / 2)
      continue;
    sum[0] += x >> 24 & BLOCK_MAX, sum[1] += x >> 12 & BLOCK_MAX, sum[2] += x & BLOCK_MAX;
  }
}

static void breaker_record(void *ud, int failed, int slow, double now) {
  lr_local *l = ud;
  lr_local_file *m = map_of(l, &l->rated);
  if (!m || state_of(atomic_load(&m->breaker)) != LUARETRY_BREAKER_CLOSED) return;
  uint64_t window = (uint64_t)atomic_load(&l->window);
  uint64_t size = (window + LR_LOCAL_BLOCKS - 1) / LR_LOCAL_BLOCKS;
  uint64_t k = atomic_fetch_add(&m->outcomes, 1), epoch = (k / size) & EPOCH_MASK;
  atomic_ullong *b = &m->blocks[epoch % LR_LOCAL_BLOCKS];
  unsigned long long w = atomic_load(b), next;
  do {
    int same = (w >> 36) == epoch;
    uint64_t n = same ? (w >> 24 & BLOCK_MAX) : 0, f = same ? (w >> 12 & BLOCK_MAX) : 0;
    uint64_t s = same ? (w & BLOCK_MAX) : 0;
    next = block_of(epoch, n + (n < BLOCK_MAX), f + (failed && f < BLOCK_MAX),
                    s + (slow && s < BLOCK_MAX));
  } while (!atomic_compare_exchange_weak(b, &w, next));
  uint64_t sum[3];
  window_sum(m, epoch, size, window, sum);
  long long fr = atomic_load(&l->failure_milli), sr = atomic_load(&l->slow_milli);
  if (sum[0] < (uint64_t)atomic_load(&l->min_calls)) return;
  if (!((fr > 0 && sum[1] * MILLI >= (uint64_t)fr * sum[0]) ||
        (sr > 0 && sum[2] * MILLI >= (uint64_t)sr * sum[0])))
    return;
  unsigned long long word = atomic_load(&m->breaker);
  while (state_of(word) == LUARETRY_BREAKER_CLOSED &&
         !atomic_compare_exchange_weak(&m->breaker, &word,
                                       pack(LUARETRY_BREAKER_OPEN, fails_of(word), 0, cs(now)))) {
  }
  if (state_of(word) == LUARETRY_BREAKER_CLOSED) window_restart(m);
}

/* engine/guard.c's lr_breaker_admits on the shared word.  A retry goes on
 * while half-open; a first attempt takes a permit (LR_REMOTE_PERMIT: the
 * chain asks so for every attempt), and permits that were never told of
 * (a probe cancelled, a process killed) come back after open_seconds. */
static int breaker_admits(void *ud, int first_attempt, double now, double left, lr_waiter *w) {
  (void)left, (void)w;
  lr_local *l = ud;
  lr_local_file *m = map_of(l, &l->breaker);
  if (!m) return LR_REMOTE_LOCAL;
  double open = (double)atomic_load(&l->open_cs) / 100;
  uint64_t probes = (uint64_t)atomic_load(&l->probes);
  unsigned long long word = atomic_load(&m->breaker), next;
  for (;;) {
    unsigned s = state_of(word);
    if (s == LUARETRY_BREAKER_CLOSED) return 1;
    int over = since(word, now) >= open;
    if (s == LUARETRY_BREAKER_OPEN && !over) return 0;
    if (s == LUARETRY_BREAKER_HALF_OPEN && !first_attempt) return 1;
    if (s == LUARETRY_BREAKER_OPEN || (probes_of(word) == 0 && over)) {
      /* half-open afresh, with this call's permit taken */
      next = pack(LUARETRY_BREAKER_HALF_OPEN, fails_of(word), first_attempt ? probes - 1 : probes,
                  cs(now));
    } else if (probes_of(word) > 0) {
      next = pack(s, fails_of(word), probes_of(word) - 1, at_of(word));
    } else {
      return 0;
    }
    /* here a first attempt always took a permit (a retry only when
     * open turned half-open, with none taken) */
    if (atomic_compare_exchange_weak(&m->breaker, &word, next))
      return first_attempt ? LR_REMOTE_PERMIT : 1;
  }
}

/* A permit a later guard refused the attempt of, or whose answer was a
 * throttling one: back, while half-open (never beyond `probes`). */
static void permit_give_back(void *ud) {
  lr_local *l = ud;
  lr_local_file *m = map_of(l, &l->breaker);
  if (!m) return;
  uint64_t probes = (uint64_t)atomic_load(&l->probes);
  unsigned long long w = atomic_load(&m->breaker), next;
  do {
    if (state_of(w) != LUARETRY_BREAKER_HALF_OPEN || probes_of(w) >= probes) return;
    next = pack(LUARETRY_BREAKER_HALF_OPEN, fails_of(w), probes_of(w) + 1, at_of(w));
  } while (!atomic_compare_exchange_weak(&m->breaker, &w, next));
}

/* ---- the admission window: ten buckets, each one word of its number
 * (40 bits: the window's tenths since boot) and its count (24) */

#define COUNT_BITS 24
#define COUNT_MAX  ((1ull << COUNT_BITS) - 1)

static void bucket_add(atomic_ullong *b, uint64_t slot) {
  unsigned long long w = atomic_load_explicit(b, memory_order_relaxed), next;
  do {
    uint64_t n = (w >> COUNT_BITS) == slot ? (w & COUNT_MAX) + 1 : 1;
    next = slot << COUNT_BITS | (n > COUNT_MAX ? COUNT_MAX : n);
  } while (!atomic_compare_exchange_weak(b, &w, next));
}

static double bucket_sum(atomic_ullong *b, uint64_t slot) {
  double sum = 0;
  for (int i = 0; i < LR_LOCAL_BUCKETS; i++) {
    unsigned long long w = atomic_load_explicit(&b[i], memory_order_relaxed), at = w >> COUNT_BITS;
    if (at <= slot && slot - at < LR_LOCAL_BUCKETS) sum += (double)(w & COUNT_MAX);
  }
  return sum;
}

static uint64_t slot_of(lr_local *l, double now) {
  long long width = atomic_load_explicit(&l->bucket_ms, memory_order_relaxed);
  return ((uint64_t)(now * 1000) / (uint64_t)(width > 0 ? width : 1)) & ((1ull << 40) - 1);
}

static void throttle_accept(void *ud, double now) {
  lr_local *l = ud;
  lr_local_file *m = map_of(l, &l->throttle);
  if (!m) return;
  uint64_t slot = slot_of(l, now);
  bucket_add(&m->accepts[slot % LR_LOCAL_BUCKETS], slot);
}

static double throttle_refusal(void *ud, double now) {
  lr_local *l = ud;
  lr_local_file *m = map_of(l, &l->throttle);
  if (!m) return LR_REMOTE_LOCAL;
  uint64_t slot = slot_of(l, now);
  return lr_throttle_formula((double)atomic_load(&l->k_milli) / MILLI,
                             bucket_sum(m->requests, slot), bucket_sum(m->accepts, slot));
}

static double throttle_request(void *ud, double now) {
  lr_local *l = ud;
  double r = throttle_refusal(ud, now);
  if (r == LR_REMOTE_LOCAL) return r;
  uint64_t slot = slot_of(l, now);
  bucket_add(&l->map->requests[slot % LR_LOCAL_BUCKETS], slot);
  return r;
}

/* A request a later guard refused (throttle_request's `now`): out of
 * the bucket it went into, unless that bucket has moved on since (it no
 * longer counts). */
static void throttle_unrequest(void *ud, double now) {
  lr_local *l = ud;
  lr_local_file *m = map_of(l, &l->throttle);
  if (!m) return;
  uint64_t slot = slot_of(l, now);
  atomic_ullong *b = &m->requests[slot % LR_LOCAL_BUCKETS];
  unsigned long long w = atomic_load_explicit(b, memory_order_relaxed);
  do {
    if ((w >> COUNT_BITS) != slot || (w & COUNT_MAX) == 0) return;
  } while (!atomic_compare_exchange_weak(b, &w, w - 1));
}

static void record(void *ud, lr_remote_outcome o, double now) {
  lr_local *l = ud;
  /* said here too: a call with no retry asks no guard before it */
  if (!l->map) return say_refused(l);
  lr_local_settings_seen(l, now); /* its settings' owner is alive */
  switch (o) {
  case LR_REMOTE_SUCCESS:
    add_tokens(l, atomic_load_explicit(&l->ratio_milli, memory_order_relaxed));
    __attribute__((fallthrough));
  case LR_REMOTE_ANSWERED: breaker_answered(l, now); return;
  case LR_REMOTE_THROTTLED:
    /* priced budget.throttle_cost; neutral to the breaker (as Redis's
     * script and the local guards): it neither ends a run of failures nor
     * closes a half-open breaker, and its probe's permit comes back
     * (permit_give_back, called by the engine's breaker: it knows whose
     * permit the attempt took) */
    add_tokens(l, -atomic_load_explicit(&l->cost_milli, memory_order_relaxed));
    return;
  case LR_REMOTE_FAILURE:
    add_tokens(l, -MILLI);
    breaker_failed(l, now);
    return;
  }
}

/* Nothing to bring up to date: every count is read where it lives (the
 * reserve too: reserve_take asks it, with no round trip). */
static int refresh(void *ud, double now, double left, lr_waiter *w, int reserve) {
  (void)ud, (void)now, (void)left, (void)w, (void)reserve;
  return LR_REMOTE_LOCAL;
}

/* ---- the rate limiter: one GCRA for the machine, its theoretical
 * arrival time in one word; slots handed out in order (FIFO) up to
 * LR_LEASE_HORIZON ahead, as Redis's lease hands them out. */

/* The furthest ahead of its `now` that rate_reserve writes the time, µs:
 * it hands out a slot t at most the horizon ahead, t no earlier than the
 * time less the burst's tolerance, and writes the time or the call's `at`
 * (no later than t) plus one interval: now + horizon + tolerance +
 * interval, with burst - 1 intervals in the tolerance. */
static long long rate_reach_us(const lr_local *l) {
  return llround(LR_LEASE_HORIZON * 1e6) + atomic_load(&l->tolerance_us) +
         atomic_load(&l->interval_us);
}

/* Settings that take the store over from others' (a reload, or others
 * gone a minute): the time others' rate wrote brought within what ours
 * would (the slots they handed out lie within the horizon, before it),
 * so that a far one, theirs or garbage, never blocks ours. */
static void rate_adopt(lr_local *l, lr_local_file *m) {
  long long most = llround(lr_monotonic_now() * 1e6) + rate_reach_us(l);
  long long cur = atomic_load(&m->tat_us);
  while (cur > most && !atomic_compare_exchange_weak(&m->tat_us, &cur, most)) {
  }
}

static int rate_reserve(void *ud, double now, double at, double latest, double left, double u,
                        lr_waiter *w, double *wait) {
  (void)left, (void)w;
  lr_local *l = ud;
  lr_local_file *m = map_of(l, &l->rate);
  if (!m) return LR_REMOTE_LOCAL;
  long long interval = atomic_load(&l->interval_us), tolerance = atomic_load(&l->tolerance_us);
  long long at_us = llround(at * 1e6), now_us = llround(now * 1e6);
  long long horizon = llround(lr_lease_horizon(now, latest) * 1e6);
  long long cur = atomic_load(&m->tat_us), t, next;
  do {
    t = cur - tolerance > at_us ? cur - tolerance : at_us;
    if (latest >= 0 && t > llround(latest * 1e6)) {
      *wait = -1;
      return 1;
    }
    if (t - now_us > horizon) { /* the fleet's slots are taken that far: ask again */
      *wait = (double)(t - horizon - at_us) / 1e6 + u * LR_LEASE_SPREAD;
      if (*wait < 0.001) *wait = 0.001;
      return 0;
    }
    next = (cur > at_us ? cur : at_us) + interval;
  } while (!atomic_compare_exchange_weak(&m->tat_us, &cur, next));
  *wait = (double)(t - at_us) / 1e6;
  return 1;
}

const lr_remote_ops lr_local_remote_ops = {
  budget_allows_retry,
  breaker_admits,
  record,
  refresh,
  tokens,
  throttle_request,
  throttle_refusal,
  spend,
  rate_reserve,
  breaker_record,
  reserve_take,
  throttle_unrequest,
  permit_give_back,
  throttle_accept,
};

/* ---- what the file holds now, for the status */

void lr_local_counts(lr_local *l, lr_local_status *st) {
  lr_local_file *m = l->map;
  double now = lr_monotonic_now();
  st->tokens = (double)tokens_of(atomic_load(&m->tokens), atomic_load(&l->max_milli)) / MILLI;
  unsigned long long w = atomic_load(&m->breaker);
  st->breaker = (int)state_of(w);
  st->consecutive_failures = (int)fails_of(w);
  st->probes_left = (int)probes_of(w);
  if (st->breaker != LUARETRY_BREAKER_CLOSED || at_of(w)) st->opened_ago = since(w, now);
  uint64_t slot = slot_of(l, now);
  if (atomic_load(&l->throttle)) {
    st->requests = bucket_sum(m->requests, slot);
    st->accepts = bucket_sum(m->accepts, slot);
    st->window_seconds = (double)atomic_load(&l->bucket_ms) * LR_LOCAL_BUCKETS / 1000;
  }
  if (atomic_load(&l->rate)) {
    double tat = (double)atomic_load(&m->tat_us) / 1e6;
    st->rate_limit = 1e6 / (double)atomic_load(&l->interval_us);
    st->rate_ahead = tat > now ? tat - now : 0;
  }
}

/* ---- a file's counts that no process of any settings writes: garbage
 * (local_file.c refuses it).  Times are this boot's CLOCK_MONOTONIC (the
 * file's name holds the boot), so one ahead of now by more than the
 * processes' clock reads differ would hold for ever (a settings' last use
 * "0 s ago" locking others out; a rate's slot a year off refusing every
 * call, as redis_rate.c's out_of_range says of Redis's).  The rate
 * limiter's time reaches rate_reach_us ahead, by the settings that wrote
 * it: judged with ours when the store's settings are ours or none yet (a
 * new or reset store; a file of an older build), not when they are
 * others' (theirs may reach further; ours adopt it when they take over:
 * rate_adopt).  The reserve's never passes its writer's now
 * (lr_reserve_gcra moves it by 1 / reserve only once now is that far
 * past it), whatever the settings. */

#define AHEAD_S    5.0        /* clock reads of processes racing */
#define TOKENS_MAX 1000000    /* budget.max_tokens's bound (1000), milli-tokens */
#define PID_LIMIT  (1u << 22) /* Linux's PID_MAX_LIMIT */

/* `at` ahead of `now` (both in units of a counter of `bits` bits) by more
 * than AHEAD_S; not judged once the counter has wrapped. */
static int ahead(uint64_t at, double now, double per_s, int bits) {
  double lim = (now + AHEAD_S) * per_s;
  return lim < (double)(1ull << bits) && (double)at > lim;
}

const char *lr_local_counts_garbage(const lr_local *l, const lr_local_file *m) {
  double now = lr_monotonic_now();
  long long ahead_us = llround((now + AHEAD_S) * 1e6);
  long long t = atomic_load(&m->tokens);
  if (t != -1 && (t < 0 || t > TOKENS_MAX)) return "the budget's tokens out of range";
  uint64_t w = atomic_load(&m->breaker);
  if (state_of(w) > LUARETRY_BREAKER_HALF_OPEN) return "the breaker's state out of range";
  if (ahead(at_of(w), now, 100, 32)) return "the breaker's time ahead of now";
  for (int i = 0; i < LR_LOCAL_BUCKETS; i++) /* a bucket is at least a ms wide */
    if (ahead(atomic_load(&m->requests[i]) >> COUNT_BITS, now, 1000, 40) ||
        ahead(atomic_load(&m->accepts[i]) >> COUNT_BITS, now, 1000, 40))
      return "the admission window's time ahead of now";
  long long tat = atomic_load(&m->tat_us);
  uint64_t cfg = atomic_load(&m->cfg_hash);
  if (tat < 0) return "the rate limiter's time out of range";
  if ((cfg == 0 || cfg == atomic_load(&l->cfg_hash)) && tat > ahead_us + rate_reach_us(l))
    return "the rate limiter's time ahead of now";
  if (atomic_load(&m->reserve_tat_us) > ahead_us) return "the budget's reserve's time ahead of now";
  if (atomic_load(&m->window_from) > atomic_load(&m->outcomes))
    return "the breaker's window out of range";
  for (int i = 0; i < LR_LOCAL_BLOCKS; i++) { /* failed and slow outcomes are among its outcomes */
    uint64_t b = atomic_load(&m->blocks[i]), n = b >> 24 & BLOCK_MAX;
    if ((b >> 12 & BLOCK_MAX) > n || (b & BLOCK_MAX) > n)
      return "the breaker's window out of range";
  }
  uint64_t seen = atomic_load(&m->cfg_seen);
  if ((seen >> 32) >= PID_LIMIT) return "the settings' last user out of range";
  if (ahead((uint32_t)seen, now, 1, 32)) return "the settings' last use ahead of now";
  return NULL;
}
