/* fleet_util.c: the clocks and the message formatting every file of
 * core/fleet/ uses (fleet_internal.h), below all of them. */
#include <stdio.h>
#include <time.h>

#include "fleet_internal.h"

int64_t lr_fleet_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t lr_fleet_coarse_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void lr_fleet_fmt(char *dst, size_t size, const char *fmt, ...) {
  if (!dst || size == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dst, size, fmt, ap);
  va_end(ap);
}
