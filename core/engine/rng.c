/* rng.c: the jitter RNG, xoshiro256** (Blackman and Vigna; its step is
 * inline, in engine.h), seeded through
 * splitmix64 so that any 64-bit seed gives a well-mixed state.  Integer
 * arithmetic only: a seed gives the same stream on every machine. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/random.h>

#include "engine.h"

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void lr_rng_seed(lr_rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

/* A call's seed is drawn from its thread's generator, itself seeded from
 * the OS once per thread: one getrandom(2) per thread, not one per call
 * (a syscall is a few percent of a local request).  A forked child seeds
 * again: it would repeat its parent's stream, and a herd of workers forked
 * from one process would jitter alike. */
static _Thread_local lr_rng seeder;
static _Thread_local unsigned long seeder_epoch; /* 0: not seeded */
static atomic_ulong fork_epoch = 1;
static pthread_once_t watch_once = PTHREAD_ONCE_INIT;

static void forked(void) { atomic_fetch_add(&fork_epoch, 1); }
static void watch_forks(void) { pthread_atfork(NULL, NULL, forked); }

int lr_rng_seed_os(lr_rng *r) {
  pthread_once(&watch_once, watch_forks);
  unsigned long epoch = atomic_load_explicit(&fork_epoch, memory_order_relaxed);
  if (seeder_epoch != epoch) {
    uint64_t seed;
    ssize_t n;
    do n = getrandom(&seed, sizeof seed, 0);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof seed) return -1;
    lr_rng_seed(&seeder, seed);
    seeder_epoch = epoch;
  }
  lr_rng_seed(r, lr_rng_next(&seeder));
  return 0;
}
