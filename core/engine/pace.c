/* pace.c: the guards that act on first attempts too: client-side
 * throttling as the SRE book describes it ("Handling Overload": each
 * client refuses a request locally with probability
 * max(0, (requests - K * accepts) / (requests + 1)) over a recent window),
 * and a rate limiter: a token bucket kept as GCRA's theoretical arrival
 * time, so a reservation is one comparison and one addition, and a waiting
 * attempt holds its token while it waits (adaptive: at most a tenth of
 * a second ahead; a later one asks again, as a token handed out at a rate
 * since lowered would come too early).  A later attempt (a retry after its
 * backoff) whose token would be free then asks when it comes: taken now,
 * it would move the bucket's time past the gap and leave it idle.
 *
 * The adaptive rate is AIMD that tolerates a little throttling.  Unlimited
 * until the first throttling answer, it then starts from 0.7 of what the
 * service took over the last second (at least 4 a second) and grows fast
 * (4 a second more per success: a slow start), until the first throttling
 * answer to an attempt sent during it (TCP's slow start ends at the first
 * loss), which takes 0.9 of 0.6 of the rate or of what the service took
 * over the last half second, the more.  From then on, at most once a
 * second, when more than 5% of the last second's answers were throttling,
 * it takes 0.9 of itself; each success adds 1 / rate, one attempt a
 * second more per second.  A decrease puts the next token an interval
 * (at the new rate) after the answer that said too fast, and tokens are
 * held at most a tenth of a second ahead, so few go at a rate since
 * lowered.  Why not AWS's CUBIC
 * (beta 0.7 on every throttling answer): a limiter with no burst (nginx's
 * limit_req, burst 0) rejects a share of requests well below its rate, as
 * sends and its clock jitter by a millisecond or two; slowing down on each
 * rejection keeps the rate far below the limit, and CUBIC's fast return to
 * the last maximum sits where rejections are already many.  Against
 * limit_req at 50 r/s, 1000 URLs at --parallel-max 16 (spec/bench/limit_req.sh):
 * 0.045 to 0.052 429s per success in 1.14 to 1.16 times the ideal time
 * over four runs (before the slow start's end and the shorter horizon);
 * at 20 r/s, 200 URLs at --parallel-max 8 (a batch that ramps its
 * transfers up, many.c): 0.045 to 0.065 in 1.18 to 1.25 times over five,
 * 0.11 to 0.16 in 1.22 to 1.36 times before; AIMD by 0.7 on every throttling answer, +6/s per second,
 * measured 0.06 to 0.09 in 1.6 to 1.8 times (before a retry's token stopped
 * idling the bucket), CUBIC 0.13 to 0.33 in 1.8 to 2.5 times.  Time is the
 * guard clock of each call (virtual in simulations). */
#include <stdlib.h>
#include <string.h>

#include "engine.h"

#define FIRST_DECREASE 0.7  /* the first throttling answer: of what the service took */
#define FIRST_FLOOR    4.0  /* ... at least this many a second */
#define PROBE          4.0  /* then, until the next: attempts a second added per success */
#define OVERSHOT       0.6  /* ... which ends taking this much of the rate, or what was taken */
#define DECREASE       0.9  /* later: the factor when throttling passes TOLERATED */
#define TOLERATED      0.05 /* the share of throttling answers over a second let be */
#define HOLD           1.0  /* seconds between decreases at least */
#define INCREASE       1.0  /* attempts a second added per second of successes */
#define MIN_RATE       0.5  /* the adaptive rate never goes below (tokens/s) */
#define HORIZON        0.1  /* adaptive: seconds of tokens handed out ahead */

static void lock(lr_pace *p) { lr_lock(&p->lock); }

static void unlock(lr_pace *p) { lr_unlock(&p->lock); }

/* Stores, not memset: a count without the lock may go on meanwhile. */
static void tally_clear(lr_tally *t) {
  for (int i = 0; i < LR_PACE_BUCKETS; i++) {
    atomic_store_explicit(&t->slot[i], 0, memory_order_relaxed);
    atomic_store_explicit(&t->n[i], 0, memory_order_relaxed);
  }
}

static void tallies_clear(lr_pace *p) {
  for (int w = 0; w < LR_TALLIES; w++) {
    tally_clear(&p->tally[w]);
    if (p->by_stripe)
      for (int k = 0; k < LR_STRIPES; k++) tally_clear(&p->by_stripe[k].t[w]);
  }
}

int lr_pace_spread(lr_pace *p) {
  struct lr_tallies *t = lr_aligned_calloc(LR_STRIPES * sizeof *t);
  if (!t) return -1;
  p->by_stripe = t;
  return 0;
}

void lr_pace_unspread(lr_pace *p) {
  free(p->by_stripe);
  p->by_stripe = NULL;
}

void lr_pace_init(lr_pace *p) {
  memset(p, 0, sizeof *p);
  atomic_flag_clear(&p->lock);
  atomic_flag_clear(&p->quota.lock);
}

void lr_pace_reset(lr_pace *p) {
  lock(p);
  memset(p->bucket_slot, 0, sizeof p->bucket_slot);
  memset(p->requests, 0, sizeof p->requests);
  memset(p->accepts, 0, sizeof p->accepts);
  p->sum_ok = 0;
  tallies_clear(p);
  p->probing = 0;
  p->tat = p->rate = p->last_decrease = 0;
  atomic_store_explicit(&p->limited, 0, memory_order_release);
  unlock(p);
  lr_quota_reset(&p->quota);
}

/* ---- the throttle's counts: ten buckets, each a tenth of the window */

/* Whether bucket i counts in the window of the totals kept (sum_slot's). */
static int summed(const lr_pace *p, int i) {
  return p->sum_ok && p->bucket_slot[i] > p->sum_slot - LR_PACE_BUCKETS;
}

static int index_of(long long slot) {
  return (int)(((slot % LR_PACE_BUCKETS) + LR_PACE_BUCKETS) % LR_PACE_BUCKETS);
}

/* The bucket for `now`, emptied when it held another slot. */
static int bucket(lr_pace *p, const lr_guards *g, double now) {
  long long slot = lr_pace_slot(now / (g->throttle_window / LR_PACE_BUCKETS));
  int i = index_of(slot);
  if (p->bucket_slot[i] != slot) {
    if (summed(p, i)) p->sum_requests -= p->requests[i], p->sum_accepts -= p->accepts[i];
    p->bucket_slot[i] = slot;
    p->requests[i] = p->accepts[i] = 0;
  }
  return i;
}

/* Adds to bucket i, and to the totals kept when it is in their window. */
static void add(lr_pace *p, int i, long requests, long accepts) {
  p->requests[i] += requests;
  p->accepts[i] += accepts;
  if (summed(p, i)) p->sum_requests += requests, p->sum_accepts += accepts;
}

/* The window's totals at `now`: those kept while the slot stays (every
 * ask of a busy policy), the ten buckets summed when it moved. */
static void totals(lr_pace *p, const lr_guards *g, double now, double *requests, double *accepts) {
  long long slot = lr_pace_slot(now / (g->throttle_window / LR_PACE_BUCKETS));
  if (!p->sum_ok || p->sum_slot != slot) {
    p->sum_requests = p->sum_accepts = 0;
    for (int i = 0; i < LR_PACE_BUCKETS; i++) {
      if (p->bucket_slot[i] <= slot - LR_PACE_BUCKETS) continue; /* out of the window */
      p->sum_requests += p->requests[i];
      p->sum_accepts += p->accepts[i];
    }
    p->sum_slot = slot;
    p->sum_ok = 1;
  }
  *requests = (double)p->sum_requests;
  *accepts = (double)p->sum_accepts;
}

double lr_throttle_formula(double k, double requests, double accepts) {
  double r = (requests - k * accepts) / (requests + 1);
  return r > 0 ? r : 0;
}

static double refusal(lr_pace *p, const lr_guards *g, double now) {
  double requests, accepts;
  totals(p, g, now, &requests, &accepts);
  return lr_throttle_formula(g->throttle_k, requests, accepts);
}

int lr_throttle_admits(lr_shared *s, const lr_guards *g, double now, double u) {
  if (!(g->throttle_k > 0)) return 1;
  lr_pace *p = &s->pace;
  lock(p);
  double r = refusal(p, g, now);
  add(p, bucket(p, g, now), 1, 0);
  unlock(p);
  return u >= r;
}

void lr_throttle_unrequest(lr_shared *s, const lr_guards *g, double now) {
  if (!(g->throttle_k > 0)) return;
  lr_pace *p = &s->pace;
  /* the bucket the request went into, if the ring has not moved past it:
   * bucket() would empty today's to relabel it */
  long long slot = lr_pace_slot(now / (g->throttle_window / LR_PACE_BUCKETS));
  int i = index_of(slot);
  lock(p);
  if (p->bucket_slot[i] == slot && p->requests[i] > 0) add(p, i, -1, 0);
  unlock(p);
}

double lr_throttle_refusal(lr_shared *s, const lr_guards *g, double now) {
  if (!(g->throttle_k > 0)) return 0;
  lock(&s->pace);
  double r = refusal(&s->pace, g, now);
  unlock(&s->pace);
  return r;
}

void lr_throttle_record(lr_shared *s, const lr_guards *g, int accepted, double now) {
  if (!(g->throttle_k > 0) || !accepted) return;
  lock(&s->pace);
  add(&s->pace, bucket(&s->pace, g, now), 0, 1);
  unlock(&s->pace);
}

void lr_throttle_add(lr_shared *s, const lr_guards *g, long long requests, long long accepts,
                     double now) {
  if (!(g->throttle_k > 0) || (!requests && !accepts)) return;
  lock(&s->pace);
  add(&s->pace, bucket(&s->pace, g, now), (long)requests, (long)accepts);
  unlock(&s->pace);
}

void lr_throttle_totals(lr_shared *s, const lr_guards *g, double now, double *requests,
                        double *accepts) {
  *requests = *accepts = 0;
  if (!(g->throttle_k > 0)) return;
  lock(&s->pace);
  totals(&s->pace, g, now, requests, accepts);
  unlock(&s->pace);
}

/* ---- the rate limiter */

/* Events in tally t over the last `tenths` tenths of a second, summed. */
static long events_in(lr_tally *t, long long slot, int tenths) {
  long sum = 0;
  for (int i = 0; i < LR_PACE_BUCKETS; i++) {
    long long at = atomic_load_explicit(&t->slot[i], memory_order_relaxed);
    if (at > slot - tenths && at <= slot)
      sum += atomic_load_explicit(&t->n[i], memory_order_relaxed);
  }
  return sum;
}

/* Events a second over the last `tenths` tenths of a second (sends,
 * successes), from their counts by tenths, on every stripe. */
static double per_second_over(lr_pace *p, int which, double now, int tenths) {
  long long slot = lr_pace_slot(now * 10);
  long sum = events_in(&p->tally[which], slot, tenths);
  if (p->by_stripe)
    for (int k = 0; k < LR_STRIPES; k++) sum += events_in(&p->by_stripe[k].t[which], slot, tenths);
  return (double)sum * LR_PACE_BUCKETS / tenths;
}

/* Events over the last second. */
static double per_second(lr_pace *p, int which, double now) {
  return per_second_over(p, which, now, LR_PACE_BUCKETS);
}

/* Adaptive: the rate it found, or until the first throttling answer its
 * most (none: not limited). */
static double current_rate(const lr_pace *p, const lr_guards *g) {
  return g->rate_adaptive && p->rate > 0 ? p->rate : g->rate_limit;
}

/* The reservation, the pace's lock held. */
static double reserve(lr_pace *p, const lr_guards *g, double rate, double now, double at,
                      double latest, double u, int *held) {
  double wait = 0;
  if (rate > 0) {
    double interval = 1 / rate, tolerance = (double)(g->rate_burst - 1) * interval;
    double start = p->tat - tolerance > at ? p->tat - tolerance : at;
    if (latest >= 0 && start > latest) return -1;
    if (start <= at && at > now) {
      /* a later attempt (a retry after its backoff) whose token is free
       * then: taken now, it would leave the bucket idle until then */
      *held = 0;
      return 0;
    }
    if (g->rate_adaptive && start - at > HORIZON) {
      /* tokens are held at most HORIZON ahead: the rate may change before
       * this one comes, so ask again then (spread over the horizon) */
      *held = 0;
      return start - at - HORIZON + u * HORIZON;
    }
    p->tat = (p->tat > start ? p->tat : start) + interval;
    wait = start - at;
  }
  lr_pace_count(p, LR_T_SENT, at + wait);
  return wait;
}

double lr_rate_reserve(lr_shared *s, const lr_guards *g, double now, double at, double latest,
                       double u, int *held) {
  *held = 1;
  if (!g->rate) return 0;
  lr_pace *p = &s->pace;
  lock(p);
  double wait = reserve(p, g, current_rate(p, g), now, at, latest, u, held);
  unlock(p);
  return wait;
}

double lr_rate_reserve_drawn(lr_shared *s, const lr_guards *g, double now, double at, double latest,
                             lr_rng *rng, int *held) {
  *held = 1;
  if (!g->rate) return 0;
  lr_pace *p = &s->pace;
  lock(p);
  double rate = current_rate(p, g);
  double u = g->rate_adaptive && rate > 0 ? lr_rng_unit(rng) : 0;
  double wait = reserve(p, g, rate, now, at, latest, u, held);
  unlock(p);
  return wait;
}

double lr_rate_tat(lr_shared *s) {
  lock(&s->pace);
  double t = s->pace.tat;
  unlock(&s->pace);
  return t;
}

/* The token is handed back only when no token was reserved after it (the
 * bucket's time is still the one it set): else a later holder's place
 * would move up, and the bucket stays where it is (a token lost, never
 * one too many). */
void lr_rate_give_back(lr_shared *s, const lr_guards *g, double tat_before, double tat_after) {
  if (!g->rate) return;
  lr_pace *p = &s->pace;
  lock(p);
  if (p->tat == tat_after) p->tat = tat_before;
  unlock(p);
}

/* A decrease: from the rate now, or from what the service took over the
 * last second when that is less (a rate that overshot). */
static void decrease(lr_pace *p, const lr_guards *g, double now) {
  /* ending a slow start, what the service took over its last half second:
   * the second before it began slower */
  double took = p->probing ? per_second_over(p, LR_T_OK, now, LR_PACE_BUCKETS / 2)
                           : per_second(p, LR_T_OK, now);
  double from = p->rate;
  if (p->probing && from > 0) /* it overshot: some of it, or what was taken (never more) */
    from = took > from ? from : took > from * OVERSHOT ? took : from * OVERSHOT;
  if (from <= 0) from = took;
  if (from <= 0) from = per_second(p, LR_T_SENT, now);
  if (g->rate_limit > 0 && (from <= 0 || from > g->rate_limit)) from = g->rate_limit;
  p->probing = p->rate == 0; /* the first: nothing known yet, probe fast */
  p->rate = from * (p->rate == 0 ? FIRST_DECREASE : DECREASE);
  if (p->rate < MIN_RATE) p->rate = MIN_RATE;
  if (p->probing && p->rate < FIRST_FLOOR) p->rate = FIRST_FLOOR;
  p->last_decrease = now;
  atomic_store_explicit(&p->limited, 1, memory_order_release);
  if (p->tat < now + 1 / p->rate) p->tat = now + 1 / p->rate;
}

void lr_rate_answer(lr_shared *s, const lr_guards *g, int throttled, double now, double sent) {
  if (!g->rate || !g->rate_adaptive) return;
  lr_pace *p = &s->pace;
  if (!throttled && !atomic_load_explicit(&p->limited, memory_order_acquire)) {
    lr_pace_count(p, LR_T_OK, now); /* not limited yet: a count, no rate to grow */
    return;
  }
  lock(p);
  if (throttled) {
    lr_pace_count(p, LR_T_THR, now);
    double thr = per_second(p, LR_T_THR, now), ok = per_second(p, LR_T_OK, now);
    /* a slow start ends at the first throttling answer to an attempt sent
     * during it (TCP's ends at the first loss); the hold spares the rate
     * the answers to what was sent before a decrease */
    if (p->rate == 0 || (p->probing && sent > p->last_decrease) ||
        (now - p->last_decrease >= HOLD && thr > TOLERATED * (thr + ok)))
      decrease(p, g, now);
  } else {
    lr_pace_count(p, LR_T_OK, now);
    if (p->probing)
      p->rate += PROBE;
    else if (p->rate > 0)
      p->rate += INCREASE / p->rate; /* ~ INCREASE a second per second */
    if (g->rate_limit > 0 && p->rate > g->rate_limit) p->rate = g->rate_limit;
  }
  unlock(p);
}

double lr_rate_now(lr_shared *s, const lr_guards *g) {
  if (!g->rate) return 0;
  lock(&s->pace);
  double r = current_rate(&s->pace, g);
  unlock(&s->pace);
  return r;
}
