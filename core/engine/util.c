/* util.c: bounded string copies and formatting that every layer uses
 * (messages are cut, never overflowed, always terminated), and blocks on
 * whole stripes of lines. */
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

void *lr_aligned_calloc(size_t size) {
  size_t rounded = (size + 127) / 128 * 128; /* a stripe's alignment */
  void *p = aligned_alloc(128, rounded);
  if (p) memset(p, 0, rounded);
  return p;
}

void lr_strlcpy(char *dst, const char *src, size_t size) {
  if (size == 0) return;
  size_t n = strlen(src);
  if (n >= size) n = size - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

void lr_escape_controls(char *dst, size_t size, const char *src) {
  size_t n = 0;
  if (size == 0) return;
  for (; *src && n + 1 < size; src++) {
    unsigned char b = (unsigned char)*src;
    if (b >= 0x20 && b != 0x7f) {
      dst[n++] = (char)b;
      continue;
    }
    if (n + 5 > size) break; /* no room for the whole \xHH */
    n += (size_t)snprintf(dst + n, size - n, "\\x%02x", b);
  }
  dst[n] = '\0';
}

void lr_fmt(char *dst, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dst, size, fmt, ap);
  va_end(ap);
}

void lr_lock_contended(atomic_flag *f) {
  for (int i = 1; atomic_flag_test_and_set_explicit(f, memory_order_acquire); i++)
    if (i >= LR_SPIN_TRIES) sched_yield(); /* the holder may be preempted: let it run */
}

int lr_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread starts with this mask */
  int rc = pthread_create(thread, NULL, fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}
