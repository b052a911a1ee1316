/* watchdog.c: the library's one helper thread.  It runs while any sandbox
 * with a time limit exists (started with the first, joined with the last),
 * counts ticks of LR_WATCHDOG_TICK_MS, and once a tick has every sandbox
 * look at itself (sandbox.c): a call into a script that has run for its
 * limit gets a hook armed that stops it at its next instruction.  It
 * never calls into the host.
 *
 * A script pays for this two relaxed stores and a compare-and-swap per
 * call into it, instead of a hook on every instruction. */
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "sandbox.h"

static struct {
  pthread_mutex_t lock; /* the list, count and thread */
  lr_watched *head;
  size_t count;
  int running;
  atomic_long incarnation; /* the thread that should run; 0: none */
  long started;            /* incarnations started so far */
  pthread_t thread;
  pthread_cond_t stop; /* signalled when the thread should end */
} wd = { .lock = PTHREAD_MUTEX_INITIALIZER };

static pthread_once_t stop_once = PTHREAD_ONCE_INIT;

/* The ticks are timed on the monotonic clock, so a change of the wall
 * clock makes no tick long or short. */
static void make_stop(void) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&wd.stop, &attr);
  pthread_condattr_destroy(&attr);
}

atomic_int lr_watchdog_orphaned;

/* fork(): the thread is not in the child.  The lock is held across the
 * fork, so the child's copy is never one the thread held mid-tick (the
 * child would wait for it for ever); the child has no thread to join.
 * Its first call into a sandbox with a time limit (an inherited policy's,
 * lr_watchdog_adopt) or the next sandbox it adds starts one, which
 * watches them all. */
static void fork_prepare(void) { pthread_mutex_lock(&wd.lock); }
static void fork_parent(void) { pthread_mutex_unlock(&wd.lock); }
static void fork_child(void) {
  wd.running = 0;
  atomic_store(&lr_watchdog_orphaned, wd.count > 0);
  atomic_store(&wd.incarnation, 0);
  make_stop(); /* the parent's thread may have been waiting on it */
  pthread_mutex_unlock(&wd.lock);
}

static void init_stop(void) {
  make_stop();
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

atomic_long lr_watchdog_ticks;

/* A thread stops once another incarnation is wanted (or none): a new one
 * may start while the last one is still being joined.  It waits on a
 * condition rather than sleeping, so the last sandbox's removal wakes it at
 * once: a short-lived process (one `luaretry run`) would otherwise wait up
 * to a tick for the join at exit. */
static void *watch(void *arg) {
  long me = (long)(intptr_t)arg;
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  pthread_mutex_lock(&wd.lock);
  while (atomic_load(&wd.incarnation) == me) {
    next.tv_nsec += LR_WATCHDOG_TICK_MS * 1000000L;
    if (next.tv_nsec >= 1000000000L) {
      next.tv_sec++;
      next.tv_nsec -= 1000000000L;
    }
    int rc = 0; /* 0 again after a spurious wakeup: wait on */
    while (rc == 0 && atomic_load(&wd.incarnation) == me)
      rc = pthread_cond_timedwait(&wd.stop, &wd.lock, &next);
    if (atomic_load(&wd.incarnation) != me) break;
    long now = atomic_fetch_add(&lr_watchdog_ticks, 1) + 1;
    for (lr_watched *w = wd.head; w; w = w->next) w->look(w, now);
    /* a tick that came late does not make the next ones come in a rush */
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (t.tv_sec > next.tv_sec || (t.tv_sec == next.tv_sec && t.tv_nsec > next.tv_nsec)) next = t;
  }
  pthread_mutex_unlock(&wd.lock);
  return NULL;
}

/* The thread, unless it runs; the lock held. */
static void start_locked(void) {
  atomic_store(&lr_watchdog_orphaned, 0);
  if (wd.running) return;
  long me = ++wd.started;
  atomic_store(&wd.incarnation, me);
  /* without the thread, time limits are not enforced, but scripts still
   * run; the memory limit still holds */
  wd.running = lr_thread_start(&wd.thread, watch, (void *)(intptr_t)me) == 0;
  if (!wd.running) atomic_store(&wd.incarnation, 0);
}

void lr_watchdog_add(lr_watched *w) {
  pthread_once(&stop_once, init_stop);
  pthread_mutex_lock(&wd.lock);
  w->prev = NULL;
  w->next = wd.head;
  if (wd.head) wd.head->prev = w;
  wd.head = w;
  wd.count++;
  start_locked();
  pthread_mutex_unlock(&wd.lock);
}

void lr_watchdog_adopt(void) {
  pthread_mutex_lock(&wd.lock);
  if (wd.count > 0) start_locked();
  pthread_mutex_unlock(&wd.lock);
}

void lr_watchdog_remove(lr_watched *w) {
  pthread_mutex_lock(&wd.lock);
  if (w->prev)
    w->prev->next = w->next;
  else if (wd.head == w)
    wd.head = w->next;
  if (w->next) w->next->prev = w->prev;
  w->prev = w->next = NULL;
  int last = --wd.count == 0 && wd.running;
  if (last) {
    atomic_store(&wd.incarnation, 0);
    wd.running = 0;
    pthread_cond_broadcast(&wd.stop);
  }
  pthread_t thread = wd.thread;
  pthread_mutex_unlock(&wd.lock);
  if (last) pthread_join(thread, NULL);
}
