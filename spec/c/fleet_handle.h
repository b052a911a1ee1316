/* fleet_handle.h: what the fleet's handle tests (test_fleet_redis.c,
 * test_fleet_lease.c) share: a logbook of what the log callback heard,
 * and a handle made with a test's settings.  Include after check.h and
 * fleet_internal.h, from one translation unit. */
#ifndef LUARETRY_FLEET_HANDLE_H
#define LUARETRY_FLEET_HANDLE_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  pthread_mutex_t mu;
  int n;
  char line[4][600];
} logbook;

/* FLEET_TEST_VERBOSE=1 prints what the callback hears. */
static void on_log(void *ud, const char *message) {
  logbook *b = ud;
  if (getenv("FLEET_TEST_VERBOSE")) fprintf(stderr, "  log: %s\n", message);
  pthread_mutex_lock(&b->mu);
  if (b->n < 4) snprintf(b->line[b->n], sizeof b->line[0], "%s", message);
  b->n++;
  pthread_mutex_unlock(&b->mu);
}

static void logbook_init(logbook *b) {
  memset(b, 0, sizeof *b);
  pthread_mutex_init(&b->mu, NULL);
}

/* A handle on url's key as member, its log to `log` when given. */
static lr_fleet *handle(const char *url, const char *key, const char *member, lr_fleet_settings s,
                        logbook *log) {
  lr_fleet *f = NULL;
  char err[300] = "";
  s.member = member;
  if (log) s.log = on_log, s.log_ud = log;
  if (!CHECK_EQ_INT(lr_fleet_new(url, key, &s, &f, err, sizeof err), LR_FLEET_OK))
    fprintf(stderr, "  lr_fleet_new(%s): %s\n", url, err);
  return f;
}

#endif
