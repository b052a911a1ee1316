/* pace.c: the guards that act on first attempts too: client-side
 * throttling as the SRE book describes it ("Handling Overload": each
 * client refuses a request locally with probability
 * max(0, (requests - K * accepts) / (requests + 1)) over a recent window),
 * and a rate limiter: a token bucket kept as GCRA's theoretical arrival
 * time, so a reservation is one comparison and one addition, and a waiting
 * attempt holds its token while it waits (adaptive: at most a second
 * ahead; a later one asks again, as a token handed out at a rate since
 * lowered would come too early).  The adaptive rate is AIMD: the first
 * throttling answer sets it to 0.7 of what the service accepted (its
 * successes) over the last second, or of what was sent when none was;
 * later throttling answers multiply it by 0.7 (the beta of AWS's adaptive
 * mode), at most once a second (the answers in flight when it slowed down
 * tell nothing new); each success adds 6 / rate, about 6 attempts a second
 * more per second.  Measured against nginx's limit_req (50 r/s, 1000 URLs,
 * spec/bench/limit_req.sh), AIMD did better than CUBIC with AWS's
 * constants (beta 0.7, C 0.4): 0.06 429s per success in 1.56x the ideal
 * time, against 0.13 to 0.33 in 1.8x to 2.5x; CUBIC's cubic probe
 * overshoots a limit with no burst.  Time is the guard clock of each call
 * (virtual in simulations). */
#include <math.h>
#include <string.h>

#include "engine.h"

#define DECREASE 0.7 /* the factor on throttling (AWS's adaptive mode's beta) */
#define INCREASE 6.0 /* attempts a second added per second of successes */
#define MIN_RATE 0.5 /* the adaptive rate never goes below (tokens/s) */
#define HORIZON  1.0 /* adaptive: seconds of tokens handed out ahead */

static void lock(lr_pace *p) {
  while (atomic_flag_test_and_set_explicit(&p->lock, memory_order_acquire)) {
  }
}

static void unlock(lr_pace *p) { atomic_flag_clear_explicit(&p->lock, memory_order_release); }

/* A bucket's number for x (time over its width), clamped: a call on the
 * virtual clock may stand 1e300 s in. */
static long long slot_of(double x) {
  if (!(x > -9e15)) return (long long)-9e15;
  if (x > 9e15) return (long long)9e15;
  return (long long)floor(x);
}

void lr_pace_init(lr_pace *p) {
  memset(p, 0, sizeof *p);
  atomic_flag_clear(&p->lock);
}

void lr_pace_reset(lr_pace *p) {
  lock(p);
  memset(p->bucket_slot, 0, sizeof p->bucket_slot);
  memset(p->requests, 0, sizeof p->requests);
  memset(p->accepts, 0, sizeof p->accepts);
  memset(p->sent_slot, 0, sizeof p->sent_slot);
  memset(p->sent, 0, sizeof p->sent);
  memset(p->ok_slot, 0, sizeof p->ok_slot);
  memset(p->ok, 0, sizeof p->ok);
  p->tat = p->rate = p->last_decrease = 0;
  unlock(p);
}

/* ---- the throttle's counts: ten buckets, each a tenth of the window */

/* The bucket for `now`, emptied when it held an older slot. */
static int bucket(lr_pace *p, const lr_guards *g, double now) {
  long long slot = slot_of(now / (g->throttle_window / LR_PACE_BUCKETS));
  int i = (int)(((slot % LR_PACE_BUCKETS) + LR_PACE_BUCKETS) % LR_PACE_BUCKETS);
  if (p->bucket_slot[i] != slot) {
    p->bucket_slot[i] = slot;
    p->requests[i] = p->accepts[i] = 0;
  }
  return i;
}

static void totals(const lr_pace *p, const lr_guards *g, double now, double *requests,
                   double *accepts) {
  long long slot = slot_of(now / (g->throttle_window / LR_PACE_BUCKETS));
  *requests = *accepts = 0;
  for (int i = 0; i < LR_PACE_BUCKETS; i++) {
    if (p->bucket_slot[i] <= slot - LR_PACE_BUCKETS) continue; /* out of the window */
    *requests += (double)p->requests[i];
    *accepts += (double)p->accepts[i];
  }
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
  p->requests[bucket(p, g, now)]++;
  unlock(p);
  return u >= r;
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
  s->pace.accepts[bucket(&s->pace, g, now)]++;
  unlock(&s->pace);
}

void lr_throttle_add(lr_shared *s, const lr_guards *g, long long requests, long long accepts,
                     double now) {
  if (!(g->throttle_k > 0) || (!requests && !accepts)) return;
  lock(&s->pace);
  int i = bucket(&s->pace, g, now);
  s->pace.requests[i] += (long)requests;
  s->pace.accepts[i] += (long)accepts;
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

/* Events over the last second, from tenths of a second (sends, successes). */
static double per_second(const long long *slots, const long *counts, double now) {
  long long slot = slot_of(now * 10);
  long sum = 0;
  for (int i = 0; i < LR_PACE_BUCKETS; i++)
    if (slots[i] > slot - LR_PACE_BUCKETS && slots[i] <= slot) sum += counts[i];
  return (double)sum;
}

static void count_at(long long *slots, long *counts, double at) {
  long long slot = slot_of(at * 10);
  int i = (int)(((slot % LR_PACE_BUCKETS) + LR_PACE_BUCKETS) % LR_PACE_BUCKETS);
  if (slots[i] != slot) {
    slots[i] = slot;
    counts[i] = 0;
  }
  counts[i]++;
}

/* Adaptive: the rate it found, or until the first throttling answer its
 * most (none: not limited). */
static double current_rate(const lr_pace *p, const lr_guards *g) {
  return g->rate_adaptive && p->rate > 0 ? p->rate : g->rate_limit;
}

double lr_rate_reserve(lr_shared *s, const lr_guards *g, double at, double latest, double u,
                       int *held) {
  *held = 1;
  if (!g->rate) return 0;
  lr_pace *p = &s->pace;
  lock(p);
  double rate = current_rate(p, g), wait = 0;
  if (rate > 0) {
    double interval = 1 / rate, tolerance = (double)(g->rate_burst - 1) * interval;
    double start = p->tat - tolerance > at ? p->tat - tolerance : at;
    if (latest >= 0 && start > latest) {
      unlock(p);
      return -1;
    }
    if (g->rate_adaptive && start - at > HORIZON) {
      /* tokens are held at most HORIZON ahead: the rate may change before
       * this one comes, so ask again then (spread over the horizon) */
      unlock(p);
      *held = 0;
      return start - at - HORIZON + u * HORIZON;
    }
    p->tat = (p->tat > start ? p->tat : start) + interval;
    wait = start - at;
  }
  count_at(p->sent_slot, p->sent, at + wait);
  unlock(p);
  return wait;
}

void lr_rate_answer(lr_shared *s, const lr_guards *g, int throttled, double now) {
  if (!g->rate || !g->rate_adaptive) return;
  lr_pace *p = &s->pace;
  lock(p);
  if (throttled && (p->rate == 0 || now - p->last_decrease >= 1)) {
    /* the first throttling answer: from what the service took, else from
     * what was sent */
    double took = per_second(p->ok_slot, p->ok, now);
    double from = p->rate > 0 ? p->rate : took > 0 ? took : per_second(p->sent_slot, p->sent, now);
    if (g->rate_limit > 0 && (from <= 0 || from > g->rate_limit)) from = g->rate_limit;
    p->rate = from * DECREASE;
    if (p->rate < MIN_RATE) p->rate = MIN_RATE;
    p->last_decrease = now;
    if (p->tat < now) p->tat = now;
  } else if (!throttled) {
    count_at(p->ok_slot, p->ok, now);
    if (p->rate > 0) p->rate += INCREASE / p->rate; /* ~ INCREASE a second per second */
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
