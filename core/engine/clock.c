/* clock.c: the monotonic clock, the virtual clock, and waits that end
 * early only when cancelled. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"

double lr_monotonic_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts); /* cannot fail for this clock id */
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t lr_monotonic_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t lr_monotonic_coarse_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void lr_waiter_init(lr_waiter *w) {
  atomic_init(&w->cancelled, 0);
  atomic_init(&w->wakeup_fd, -1);
  atomic_init(&w->blocking, 0);
}

/* Eventfds no cancel wrote to, kept for the next calls of the process: a
 * call that waits (every HTTP attempt does) would otherwise open and close
 * one, two syscalls a call.  A few at most (a host's threads do not each
 * keep one), under a lock held for a few instructions; a forked child
 * closes its copies, which it shares with its parent.  No thread-exit
 * hook: a key's destructor would run the library's code after a dlclose
 * of the Lua module. */
#define SPARE_FDS 16
static struct {
  pthread_mutex_t lock;
  int fd[SPARE_FDS], count;
} spare = { .lock = PTHREAD_MUTEX_INITIALIZER };
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;

static void spare_lock(void) { pthread_mutex_lock(&spare.lock); }
static void spare_unlock(void) { pthread_mutex_unlock(&spare.lock); }

static void spare_forked(void) { /* the child, one thread, the lock held by it */
  while (spare.count > 0) close(spare.fd[--spare.count]);
  pthread_mutex_unlock(&spare.lock);
}

static void watch_forks(void) { pthread_atfork(spare_lock, spare_unlock, spare_forked); }

static int new_fd(void) {
  int fd = -1;
  pthread_once(&spare_once, watch_forks);
  pthread_mutex_lock(&spare.lock);
  if (spare.count > 0) fd = spare.fd[--spare.count];
  pthread_mutex_unlock(&spare.lock);
  return fd >= 0 ? fd : eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

/* The eventfd is made (or taken from the spares) on the first wait that
 * needs it, by the waiting thread: a call that never waits makes no system
 * call for it.  Stored before the waiter looks at `cancelled`, read by a
 * cancel after it sets `cancelled`: one of the two always sees the other. */
int lr_waiter_fd(lr_waiter *w) {
  int fd = atomic_load(&w->wakeup_fd);
  if (fd < 0) {
    fd = new_fd();
    if (fd >= 0) atomic_store(&w->wakeup_fd, fd);
  }
  return fd;
}

/* A cancel sets `cancelled` before it writes: an fd of a call never
 * cancelled holds nothing and serves again. */
void lr_waiter_close(lr_waiter *w) {
  int fd = atomic_exchange(&w->wakeup_fd, -1);
  if (fd < 0) return;
  int kept = 0;
  if (!atomic_load(&w->cancelled)) {
    pthread_once(&spare_once, watch_forks);
    pthread_mutex_lock(&spare.lock);
    if (spare.count < SPARE_FDS) spare.fd[spare.count++] = fd, kept = 1;
    pthread_mutex_unlock(&spare.lock);
  }
  if (!kept) close(fd);
}

/* Only atomics and write(2): all async-signal-safe. */
void lr_waiter_cancel(lr_waiter *w) {
  int saved = errno;
  atomic_store(&w->cancelled, 1);
  int fd = atomic_load(&w->wakeup_fd);
  if (fd >= 0) {
    uint64_t one = 1;
    ssize_t n = write(fd, &one, sizeof one);
    (void)n; /* a full counter already wakes the waiter */
  }
  errno = saved;
}

static struct timespec to_timespec(double seconds) {
  struct timespec ts;
  if (seconds > 1e9) seconds = 1e9; /* ppoll's limit is far beyond any wait */
  ts.tv_sec = (time_t)seconds;
  ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
  if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
  /* Round up to the next nanosecond so a wait never ends a hair early. */
  else
    ts.tv_nsec += 1;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec += 1;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

int lr_wait(lr_clock *c, lr_waiter *w, double seconds) {
  if (atomic_load(&w->cancelled)) return 1;
  if (!(seconds > 0)) return 0; /* a zero wait makes no syscall */
  if (c->is_virtual) {
    c->virtual_now += seconds;
    return 0;
  }
  double end = lr_monotonic_now() + seconds;
  int fd = lr_waiter_fd(w);
  for (;;) {
    if (atomic_load(&w->cancelled)) return 1;
    double left = end - lr_monotonic_now();
    if (left <= 0) return 0;
    if (fd >= 0) {
      struct timespec ts = to_timespec(left);
      struct pollfd pfd = { .fd = fd, .events = POLLIN };
      /* EINTR: loop and re-check; readable but not cancelled (a cancel that
       * raced with the free of the fd's last call): emptied, or it would
       * wake this wait at once again and again */
      if (ppoll(&pfd, 1, &ts, NULL) > 0 && !atomic_load(&w->cancelled)) {
        uint64_t count;
        ssize_t n = read(fd, &count, sizeof count);
        (void)n;
      }
    } else {
      /* no eventfd to be had: notice a cancel within 10 ms */
      struct timespec ts = to_timespec(left < 0.01 ? left : 0.01);
      nanosleep(&ts, NULL);
    }
  }
}
