/* grace.c: reads without a lock, and reference counts striped by thread
 * (engine.h).  Every call's begin reads the policy's current load and
 * takes a reference on it, and its free gives it back; under a mutex and
 * one shared count, two threads calling at once spent most of their time
 * passing those two lines back and forth.  Here a reader touches only its
 * stripe's lines, and the rare writer (a reload, a policy's free) waits.
 *
 * The windows are SRCU's two counts per stripe: a reader adds to the count
 * of the phase it read; a grace flips the phase and waits for the other
 * count to drain, twice, so that a reader that read the phase before one
 * flip and opened its window after it is waited for too.  Every operation
 * is sequentially consistent: a window opened after a drain saw its count
 * at 0 comes after the writer's store of the new pointer, and sees it. */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "engine.h"

/* The thread's stripe, from 1 (0: not chosen yet), negative when shared:
 * the first LR_OWNED_STRIPES threads to count own one each, for good (a
 * thread's end is not seen: a key's destructor would run the library's code
 * after a dlclose of the Lua module), and are its only writer; later
 * threads share the rest.  One thread-local, for the windows here and the
 * counters (guard.c, pace.c): each costs a call in a shared object. */
_Thread_local int lr_thread_stripe;
static atomic_uint stripes_owned, stripes_handed;

__attribute__((noinline)) int lr_choose_stripe(void) {
  unsigned k = atomic_fetch_add(&stripes_owned, 1);
  if (k < LR_OWNED_STRIPES)
    lr_thread_stripe = (int)k + 1;
  else
    lr_thread_stripe =
      -(LR_OWNED_STRIPES + 1 +
        (int)(atomic_fetch_add(&stripes_handed, 1) % (LR_STRIPES - LR_OWNED_STRIPES)));
  return lr_thread_stripe;
}

static struct { _Alignas(128) atomic_long open[2]; } windows[LR_STRIPES];
static atomic_int phase;
static pthread_mutex_t grace_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t watch_once = PTHREAD_ONCE_INIT;

/* A fork's child has one thread, in no window: the windows other threads
 * had open at the fork would never close, and a grace would wait for
 * ever. */
static void grace_prepare(void) { pthread_mutex_lock(&grace_lock); }
static void grace_parent(void) { pthread_mutex_unlock(&grace_lock); }
static void grace_child(void) {
  for (int i = 0; i < LR_STRIPES; i++)
    for (int ph = 0; ph < 2; ph++) atomic_store(&windows[i].open[ph], 0);
  pthread_mutex_unlock(&grace_lock);
}
static void watch_forks(void) { pthread_atfork(grace_prepare, grace_parent, grace_child); }

/* A window: its stripe, whether the thread owns it, its phase.  A thread
 * that has not counted yet (one that only reads a policy's metrics, say)
 * takes no stripe of its own for it: a shared one serves. */
int lr_read_begin(void) {
  int k = lr_thread_stripe ? lr_thread_stripe : -(LR_OWNED_STRIPES + 1);
  int owned = k > 0, i = lr_stripe_index(k);
  int ph = atomic_load(&phase) & 1;
  atomic_fetch_add(&windows[i].open[ph], 1);
  return i << 2 | owned << 1 | ph;
}

void lr_read_end(int window) {
  atomic_fetch_sub_explicit(&windows[window >> 2].open[window & 1], 1, memory_order_release);
}

static void drain(int ph) {
  for (int i = 0; i < LR_STRIPES; i++)
    for (unsigned spins = 0; atomic_load(&windows[i].open[ph]) != 0; spins++)
      if (spins >= 100) sched_yield(); /* a reader preempted in its window */
}

void lr_grace(void) {
  pthread_mutex_lock(&grace_lock);
  for (int flip = 0; flip < 2; flip++) {
    int ph = atomic_load(&phase) & 1;
    atomic_store(&phase, !ph);
    drain(ph);
  }
  pthread_mutex_unlock(&grace_lock);
}

/* ---- the striped count */

/* Added to the one count while a retire folds the stripes: a give that
 * already counts there cannot take it to 0 before the stripes' are in. */
#define FOLDING (LONG_MAX / 4)

void lr_sref_init(lr_sref *r) {
  pthread_once(&watch_once, watch_forks);
  for (int i = 0; i < LR_STRIPES; i++) atomic_init(&r->stripe[i].n, 0);
  atomic_init(&r->central, 1);
  atomic_init(&r->striped, 0);
}

void lr_sref_publish(lr_sref *r) { atomic_store(&r->striped, 1); }

static void stripe_add(lr_sref *r, int window, long n) {
  atomic_long *v = &r->stripe[window >> 2].n;
  if (window & 2) /* the thread's own stripe: no locked add */
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + n,
                          memory_order_relaxed);
  else
    atomic_fetch_add_explicit(v, n, memory_order_relaxed);
}

void lr_sref_take_in(lr_sref *r, int window) {
  if (atomic_load(&r->striped))
    stripe_add(r, window, 1);
  else
    atomic_fetch_add(&r->central, 1);
}

void lr_sref_take(lr_sref *r) {
  int w = lr_read_begin();
  lr_sref_take_in(r, w);
  lr_read_end(w);
}

int lr_sref_give(lr_sref *r) {
  int w = lr_read_begin();
  int last = 0;
  if (atomic_load(&r->striped))
    stripe_add(r, w, -1); /* published: the maker's reference is still held */
  else
    last = atomic_fetch_sub(&r->central, 1) == 1;
  lr_read_end(w);
  return last;
}

void lr_sref_retire(lr_sref *r) {
  atomic_fetch_add(&r->central, FOLDING);
  atomic_store(&r->striped, 0);
  lr_grace(); /* no take or give on a stripe is under way any more */
  long sum = 0;
  for (int i = 0; i < LR_STRIPES; i++) sum += atomic_load(&r->stripe[i].n);
  atomic_fetch_add(&r->central, sum - FOLDING);
}
