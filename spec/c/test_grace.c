/* test_grace.c: reads without a lock and reference counts by thread stripe
 * (core/engine/grace.c), which every call's begin and free go through
 * (lr_policy_current, the load's reference).  What luaretry.h promises on
 * top of it: a reload while threads run calls frees the old load once,
 * after its last call, and never before.  Here: a striped count's last
 * give is seen once and only at the end; threads that read a shared
 * pointer and take references while another replaces it never touch a
 * freed object (ASan and TSan in make test), and each object is freed
 * exactly once; a fork's child whose parent had a window open can still
 * wait out a grace (it would wait for ever: bounded by alarm). */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "engine/engine.h"

/* One thread: takes and gives on a published count are the stripe's; the
 * give that ends the count is the last, after the retire, once. */
static void test_one_thread(void) {
  lr_sref r;
  lr_sref_init(&r);
  lr_sref_take(&r); /* unpublished: the one count */
  CHECK(lr_sref_give(&r) == 0);
  lr_sref_publish(&r);
  int lasts = 0;
  for (int i = 0; i < 5; i++) lr_sref_take(&r);
  for (int i = 0; i < 5; i++) lasts += lr_sref_give(&r); /* the maker's is still held */
  lr_sref_take(&r);                                      /* a call still running */
  lr_sref_retire(&r);
  lasts += lr_sref_give(&r); /* the maker's */
  CHECK_EQ_INT(lasts, 0);
  CHECK_EQ_INT(lr_sref_give(&r), 1); /* the call's: the last */
}

/* The policy's current load, as lr_policy_current reads it. */
typedef struct {
  lr_sref refs;
  atomic_int poisoned; /* set just before its free */
  long serial;
} object;

static _Atomic(object *) current;
static atomic_long made, freed, reads;
static atomic_int stop, readers_left;

static void drop(object *o) {
  if (!lr_sref_give(&o->refs)) return;
  /* a second free would be a double free (ASan); a late use a
   * use-after-free, which the plain build may see poisoned */
  atomic_fetch_add(&freed, 1);
  atomic_store(&o->poisoned, 1);
  free(o);
}

static object *make(long serial) {
  object *o = lr_aligned_calloc(sizeof *o);
  if (!o) abort();
  lr_sref_init(&o->refs);
  o->serial = serial;
  atomic_fetch_add(&made, 1);
  return o;
}

#define READERS 3
#define SWAPS   300
#define HELD    4

/* Takes references to whatever is current, holds a few (calls in flight
 * across a swap), and gives them back, reading the object meanwhile. */
static void *reader(void *arg) {
  (void)arg;
  object *held[HELD] = { 0 };
  long bad = 0;
  for (long i = 0; i < 2000000 && !atomic_load(&stop); i++) {
    int w = lr_read_begin();
    object *o = atomic_load(&current);
    lr_sref_take_in(&o->refs, w);
    lr_read_end(w);
    if (atomic_load(&o->poisoned)) bad++; /* a freed object: ASan, TSan, or this */
    atomic_fetch_add_explicit(&reads, 1, memory_order_relaxed);
    int k = (int)(i % HELD);
    if (held[k]) drop(held[k]);
    held[k] = o;
  }
  for (int k = 0; k < HELD; k++)
    if (held[k]) drop(held[k]);
  atomic_fetch_sub(&readers_left, 1);
  return (void *)bad;
}

static void test_swaps(void) {
  atomic_store(&made, 0);
  atomic_store(&freed, 0);
  atomic_store(&stop, 0);
  atomic_store(&readers_left, READERS);
  object *first = make(0);
  lr_sref_publish(&first->refs);
  atomic_store(&current, first);
  pthread_t t[READERS];
  for (int i = 0; i < READERS; i++) pthread_create(&t[i], NULL, reader, NULL);
  for (long s = 1; s <= SWAPS; s++) {
    object *next = make(s);
    lr_sref_publish(&next->refs);
    object *old = atomic_exchange(&current, next);
    lr_sref_retire(&old->refs);
    drop(old); /* the maker's reference */
    /* the readers read each object a while, bounded in time: a starved
     * reader only makes the test weaker.  Once they have all ended there
     * is nothing to wait for (a count of 20,000 yields, beside 4 busy
     * loops, made each a time slice: the 300 swaps outlived make test's
     * limit, final92) */
    long seen = atomic_load(&reads);
    double until = lr_monotonic_now() + 0.02;
    while (atomic_load(&readers_left) > 0 && atomic_load(&reads) < seen + 200 &&
           lr_monotonic_now() < until)
      sched_yield();
  }
  atomic_store(&stop, 1);
  long bad = 0;
  for (int i = 0; i < READERS; i++) {
    void *r;
    pthread_join(t[i], &r);
    bad += (long)r;
  }
  CHECK_EQ_INT(bad, 0);
  /* every replaced object is freed once its readers let go; the current
   * one is still held */
  CHECK_EQ_INT(atomic_load(&freed), SWAPS);
  object *last = atomic_load(&current);
  lr_sref_retire(&last->refs);
  drop(last);
  CHECK_EQ_INT(atomic_load(&freed), atomic_load(&made));
}

/* A thread of the parent holds a window open across the fork; the child
 * (one thread: that window will never close there) must still finish a
 * grace. */
static atomic_int window_open, may_close;

static void *holder(void *arg) {
  (void)arg;
  int w = lr_read_begin();
  atomic_store(&window_open, 1);
  while (!atomic_load(&may_close)) usleep(1000);
  lr_read_end(w);
  return NULL;
}

static void test_fork(void) {
  pthread_t t;
  pthread_create(&t, NULL, holder, NULL);
  for (int i = 0; i < 5000 && !atomic_load(&window_open); i++) usleep(1000);
  CHECK(atomic_load(&window_open));
  pid_t pid = fork();
  if (pid == 0) {
    alarm(10); /* the child that waits for ever is killed: the check fails */
    lr_grace();
    _exit(0);
  }
  int status = 0;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  atomic_store(&may_close, 1);
  pthread_join(t, NULL);
  lr_grace(); /* the parent's window closed: its grace ends too (else
               * make test's timeout stops the test) */
}

/* A thread that only reads (a metrics reader's lr_policy_current) takes
 * no stripe of its own: the first six threads that count keep theirs. */
static void *only_reads(void *arg) {
  (void)arg;
  int w = lr_read_begin();
  lr_read_end(w);
  return (void *)(intptr_t)lr_thread_stripe;
}

static void test_reader_takes_no_stripe(void) {
  pthread_t t;
  void *stripe = (void *)1;
  pthread_create(&t, NULL, only_reads, NULL);
  pthread_join(t, &stripe);
  CHECK(stripe == NULL);
}

int main(void) {
  test_reader_takes_no_stripe();
  test_one_thread();
  test_swaps();
  test_fork();
  return check_done();
}
