/* hedge.c: the delay before a hedge: fixed, or a percentile of the
 * latencies the policy's calls saw lately (as Polly's dynamic hedging and
 * "The Tail at Scale" advise: hedge after the 95th percentile), kept in
 * a ring every thread writes with relaxed atomics. */
#include <math.h>
#include <stdlib.h>

#include "engine.h"

void lr_latency_record(lr_latency *l, double seconds) {
  if (!l || !(seconds >= 0)) return;
  double units = seconds * 1e4;
  unsigned v = units >= 4e9 ? 4000000000u : (unsigned)units + 1; /* 0: empty */
  unsigned long long i = atomic_fetch_add_explicit(&l->next, 1, memory_order_relaxed);
  atomic_store_explicit(&l->ms100[i % LR_LATENCY_RING], v, memory_order_relaxed);
}

static int by_value(const void *a, const void *b) {
  unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
  return x < y ? -1 : x > y;
}

double lr_latency_delay(const lr_hedge *h) {
  if (h->percentile <= 0) return h->delay;
  const lr_latency *l = h->latency;
  unsigned long long n = l ? atomic_load_explicit(&l->next, memory_order_relaxed) : 0;
  if (n < LR_LATENCY_MIN) return h->ceiling;
  unsigned v[LR_LATENCY_RING];
  size_t k = 0;
  for (size_t i = 0; i < LR_LATENCY_RING && i < n; i++) {
    unsigned x = atomic_load_explicit(&l->ms100[i], memory_order_relaxed);
    if (x) v[k++] = x;
  }
  if (k == 0) return h->ceiling;
  qsort(v, k, sizeof v[0], by_value);
  size_t at = (size_t)ceil(h->percentile / 100 * (double)k);
  double d = (double)(v[at ? at - 1 : 0] - 1) * 1e-4;
  return d < h->floor ? h->floor : d > h->ceiling ? h->ceiling : d;
}
