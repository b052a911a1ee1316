/* worker.c: the handle's own thread.  Every round trip the engine's
 * questions need (a batch after a failure or once per sync period, a
 * half-open breaker's probe permit, a block of the rate limiter's slots)
 * is made here, so that a call's steps never wait for Redis: they kick the
 * worker and decide at once with what is known (the last sync's state and
 * this process's counts since, or the local guards).
 *
 * Besides kicks, a timer (lr_fleet_timer): fn(f, 0) called unasked at a
 * set time, the earliest asked for: a sync that sends what waited for the
 * sync period, or gives back a block of the budget's tokens nobody spends
 * (budget_lease.c); nothing when nothing is owed by then.
 *
 * Started by the first kick (a handle nobody uses costs no thread), ended
 * by lr_fleet_flush or lr_fleet_free (a round trip under way is cut short:
 * its batch is dropped, as a failed one's is).  It blocks every signal (the host's handlers run on
 * the host's threads) and never calls into the host: the health changes it
 * notices are told by the next call into the handle on a caller's thread
 * (lr_fleet_tell).  A fork's child has no worker and its handle makes no
 * round trip (the connection is the parent's): its calls are decided by
 * the local guards. */
#include <time.h>
#include <unistd.h>

#include "fleet_internal.h"

/* Forks so far, counted in the child: a handle made before the last one
 * is the parent's (a load, not a system call, on every question). */
static atomic_uint forks;
static pthread_once_t forks_once = PTHREAD_ONCE_INIT;
static void forked(void) { atomic_fetch_add(&forks, 1); }
static void count_forks(void) { pthread_atfork(NULL, NULL, forked); }

unsigned lr_fleet_forks(void) {
  pthread_once(&forks_once, count_forks);
  return atomic_load(&forks);
}

int lr_fleet_owned(const lr_fleet *f) {
  return atomic_load_explicit(&forks, memory_order_relaxed) == f->forks;
}

static void *work(void *ud) {
  lr_fleet *f = ud;
  pthread_mutex_lock(&f->wlock);
  for (;;) {
    lr_fleet_work_fn timer = NULL;
    while (!f->wstop && !f->wwork) {
      int64_t at = atomic_load(&f->wtimer_at);
      if (!at) {
        pthread_cond_wait(&f->wcond, &f->wlock);
        continue;
      }
      if (lr_monotonic_ms() >= at) { /* the timer is due */
        atomic_store(&f->wtimer_at, 0);
        timer = f->wtimer_fn;
        break;
      }
      struct timespec ts = { (time_t)(at / 1000), (long)(at % 1000) * 1000000L };
      pthread_cond_clockwait(&f->wcond, &f->wlock, CLOCK_MONOTONIC, &ts);
    }
    if (f->wstop) break;
    int asked = f->wwork;
    lr_fleet_work_fn fn[3] = { f->wfn[0], f->wfn[1], f->wfn[2] };
    f->wwork = 0;
    atomic_store(&f->wpending, 0);
    pthread_mutex_unlock(&f->wlock);
    if (timer) timer(f, 0);
    /* each function once, with every bit it does */
    for (int i = 0; i < 3; i++) {
      if (!(asked & (1 << i)) || !fn[i]) continue;
      int mine = 0;
      for (int j = i; j < 3; j++)
        if ((asked & (1 << j)) && fn[j] == fn[i]) mine |= 1 << j;
      asked &= ~mine;
      fn[i](f, mine);
    }
    pthread_mutex_lock(&f->wlock);
  }
  pthread_mutex_unlock(&f->wlock);
  return NULL;
}

/* With wlock held. */
static void start(lr_fleet *f) { f->wstate = lr_thread_start(&f->wthread, work, f) == 0 ? 1 : -1; }

void lr_fleet_kick(lr_fleet *f, int asked, lr_fleet_work_fn fn) {
  if ((atomic_load_explicit(&f->wpending, memory_order_relaxed) & asked) == asked) return;
  if (!lr_fleet_owned(f)) return;
  pthread_mutex_lock(&f->wlock);
  if (f->wstate == 0 && !f->wstop) start(f);
  if (f->wstate == 1) {
    for (int j = 0; j < 3; j++)
      if (asked & (1 << j)) f->wfn[j] = fn;
    f->wwork |= asked;
    atomic_fetch_or(&f->wpending, asked);
    pthread_cond_signal(&f->wcond);
  }
  pthread_mutex_unlock(&f->wlock);
}

void lr_fleet_timer(lr_fleet *f, int64_t at, lr_fleet_work_fn fn) {
  if (!lr_fleet_owned(f)) return;
  pthread_mutex_lock(&f->wlock);
  if (f->wstate == 0 && !f->wstop) start(f);
  long long armed = atomic_load(&f->wtimer_at);
  if (f->wstate == 1 && (!armed || at < armed)) { /* the earlier wins */
    f->wtimer_fn = fn;
    atomic_store(&f->wtimer_at, at);
    pthread_cond_signal(&f->wcond); /* its wait is reckoned again */
  }
  pthread_mutex_unlock(&f->wlock);
}

void lr_fleet_worker_stop(lr_fleet *f) {
  pthread_mutex_lock(&f->wlock);
  int running = f->wstate == 1 && lr_fleet_owned(f);
  f->wstop = 1;
  /* joined once: a second stop (lr_fleet_flush, then lr_fleet_free) must
   * not join a thread that is gone (it hung test_fleet_calls) */
  if (running) f->wstate = 2;
  pthread_cond_signal(&f->wcond);
  pthread_mutex_unlock(&f->wlock);
  if (!running) return;
  lr_waiter_cancel(&f->stopper); /* a round trip under way ends at once */
  pthread_join(f->wthread, NULL);
}
