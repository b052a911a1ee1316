/* test_admission_totals.c: admission's window totals are kept as its
 * buckets change (issue 28: the ten buckets were summed on every ask), and
 * what it keeps is what summing them would give.  A fixed seed drives
 * 200,000 random steps on one policy's shared state: asks, uncounted asks,
 * accepts and a fleet's additions, at times that move forward, stay, jump
 * and go back (calls on virtual clocks stand apart), with a reset now and
 * then; after each, the totals it reports equal the buckets of the window
 * summed here, and its refusal is the SRE formula of them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "engine/engine.h"

#define STEPS 200000

static unsigned long long state = 0x9e3779b97f4a7c15ull;
static double unit(void) { /* splitmix64 */
  unsigned long long z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

/* The window's totals summed from the buckets, as pace.c did on every ask. */
static void summed(const lr_pace *p, const lr_guards *g, double now, double *req, double *acc) {
  long long slot = (long long)floor(now / (g->throttle_window / LR_PACE_BUCKETS));
  *req = *acc = 0;
  for (int i = 0; i < LR_PACE_BUCKETS; i++) {
    if (p->bucket_slot[i] <= slot - LR_PACE_BUCKETS) continue;
    *req += (double)p->requests[i];
    *acc += (double)p->accepts[i];
  }
}

/* A request given back after the ring moved past its bucket changes
 * nothing: it must not empty today's bucket to relabel it. */
static void late_give_back(void) {
  lr_guards g = { 0 };
  g.throttle_k = 2;
  g.throttle_window = 10;
  lr_shared *s = lr_aligned_calloc(sizeof *s);
  if (!CHECK(s != NULL)) return;
  lr_shared_init(s, &g);
  lr_throttle_admits(s, &g, 1000.5, 1);
  for (int i = 0; i < 3; i++) lr_throttle_admits(s, &g, 1020.5, 1); /* the same ring index */
  lr_throttle_unrequest(s, &g, 1000.5);                             /* held since 1000.5 */
  double req, acc;
  lr_throttle_totals(s, &g, 1020.5, &req, &acc);
  CHECK_EQ_INT((int)req, 3);
  lr_throttle_unrequest(s, &g, 1020.5); /* one of today's: taken back */
  lr_throttle_totals(s, &g, 1020.5, &req, &acc);
  CHECK_EQ_INT((int)req, 2);
  free(s);
}

int main(void) {
  late_give_back();
  lr_guards g = { 0 };
  g.throttle_k = 2;
  g.throttle_window = 10; /* buckets of a second */
  lr_shared *s = lr_aligned_calloc(sizeof *s);
  if (!CHECK(s != NULL)) return check_done();
  lr_shared_init(s, &g);
  double now = 1000, most = 0;
  int wrong = 0, moved = 0;
  for (int i = 0; i < STEPS; i++) {
    double r = unit();
    if (r < 0.6)
      now += unit() * 0.05; /* forward within a bucket, mostly */
    else if (r < 0.62)
      now += unit() * 30; /* past the window */
    else if (r < 0.64)
      now -= unit() * 15; /* a call whose clock is behind */
    else if (r < 0.6401)
      lr_pace_reset(&s->pace);
    double a = unit();
    if (a < 0.5)
      lr_throttle_admits(s, &g, now, unit());
    else if (a < 0.65)
      lr_throttle_unrequest(s, &g, now);
    else if (a < 0.95)
      lr_throttle_record(s, &g, unit() < 0.6, now);
    else
      lr_throttle_add(s, &g, (long long)(unit() * 5), (long long)(unit() * 3), now);
    double q = now + (unit() < 0.9 ? 0 : (unit() - 0.5) * 20); /* asked at another time too */
    double kept_r, kept_a, sum_r, sum_a;
    lr_throttle_totals(s, &g, q, &kept_r, &kept_a);
    summed(&s->pace, &g, q, &sum_r, &sum_a);
    if (kept_r != sum_r || kept_a != sum_a) {
      if (wrong++ < 5)
        fprintf(stderr, "step %d at %.3f: kept %.0f/%.0f, summed %.0f/%.0f\n", i, q, kept_r, kept_a,
                sum_r, sum_a);
    }
    double refusal = lr_throttle_refusal(s, &g, q);
    if (refusal != lr_throttle_formula(g.throttle_k, sum_r, sum_a)) wrong++;
    if (sum_r > most) most = sum_r;
    moved += sum_r > 0 && sum_a > 0;
  }
  CHECK_EQ_INT(wrong, 0);
  CHECK(most > 20);         /* the window did fill ... */
  CHECK(moved > STEPS / 4); /* ... with requests and accepts in it */
  printf(
    "test_admission_totals: %d steps, the window's totals kept as summed (at most %.0f "
    "requests in it)\n",
    STEPS, most);
  free(s);
  return check_done();
}
