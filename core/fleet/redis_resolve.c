/* redis_resolve.c: turning HOST into an address within the connect
 * deadline.  getaddrinfo() blocks for as long as the system resolver likes
 * (seconds per server in resolv.conf), which no poll() can cut short, so a
 * name goes through glibc's getaddrinfo_a: the lookup runs in glibc's own
 * helper thread (which never calls into the host) and we wait for it with
 * gai_suspend until the deadline.  A lookup that outlives the deadline is
 * kept, not abandoned: the next connect attempt (after the reconnect
 * backoff) picks up its answer.  A numeric address needs none of this. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fleet_internal.h"

struct lr_lookup {
  struct gaicb cb; /* first: gai_* functions see only this */
  struct addrinfo hints;
  char name[256], service[16];
};

static void take(const struct addrinfo *ai, lr_addresses *out) {
  out->count = 0;
  for (; ai && out->count < LR_RESOLVE_MAX; ai = ai->ai_next) {
    if (ai->ai_addrlen > sizeof out->addr[0]) continue;
    memcpy(&out->addr[out->count], ai->ai_addr, ai->ai_addrlen);
    out->len[out->count++] = ai->ai_addrlen;
  }
}

static lr_fleet_code start_lookup(lr_resolver *r, const char *host, const char *service, char *err,
                                  size_t errlen) {
  struct lr_lookup *l = calloc(1, sizeof *l);
  if (!l) return LR_FLEET_E_NOMEM;
  snprintf(l->name, sizeof l->name, "%s", host);
  snprintf(l->service, sizeof l->service, "%s", service);
  l->hints.ai_socktype = SOCK_STREAM;
  l->hints.ai_flags = AI_NUMERICSERV;
  l->cb.ar_name = l->name;
  l->cb.ar_service = l->service;
  l->cb.ar_request = &l->hints;
  struct gaicb *list[1] = { &l->cb };
  int e = getaddrinfo_a(GAI_NOWAIT, list, 1, NULL);
  if (e != 0) {
    lr_fmt(err, errlen, "looking up %s: %s", host, gai_strerror(e));
    free(l);
    return e == EAI_MEMORY ? LR_FLEET_E_NOMEM : LR_FLEET_E_CONNECT;
  }
  r->pending = l;
  return LR_FLEET_OK;
}

/* Waits for r->pending until the deadline, or a cancel of w (seen within
 * 20 ms); its gai_error. */
static int wait_lookup(lr_resolver *r, int64_t deadline_ms, lr_waiter *w) {
  const struct gaicb *list[1] = { &r->pending->cb };
  for (int rounds = 0; rounds < 100000; rounds++) {
    int e = gai_error(&r->pending->cb);
    if (e != EAI_INPROGRESS) return e;
    int64_t left = deadline_ms - lr_monotonic_ms();
    if (left <= 0 || (w && atomic_load(&w->cancelled))) return EAI_INPROGRESS;
    if (w && left > 20) left = 20;
    struct timespec ts = { (time_t)(left / 1000), (long)(left % 1000) * 1000000L };
    gai_suspend(list, 1, &ts); /* woken by the answer, a signal or time */
  }
  return gai_error(&r->pending->cb);
}

static lr_fleet_code resolve_name(lr_resolver *r, const char *host, const char *service,
                                  int64_t deadline_ms, lr_waiter *w, lr_addresses *out, char *err,
                                  size_t errlen) {
  if (r->pending &&
      (strcmp(r->pending->name, host) != 0 || strcmp(r->pending->service, service) != 0))
    lr_resolver_close(r);
  if (!r->pending) {
    lr_fleet_code rc = start_lookup(r, host, service, err, errlen);
    if (rc != LR_FLEET_OK) return rc;
  }
  int e = wait_lookup(r, deadline_ms, w);
  if (e == EAI_INPROGRESS && w && atomic_load(&w->cancelled)) {
    lr_fmt(err, errlen, "looking up %s: the call was cancelled", host);
    return LR_FLEET_E_CANCELLED;
  }
  if (e == EAI_INPROGRESS) {
    lr_fmt(err, errlen, "looking up %s: no answer in time", host);
    return LR_FLEET_E_TIMEOUT;
  }
  struct addrinfo *res = r->pending->cb.ar_result;
  lr_fleet_code rc = LR_FLEET_OK;
  if (e == 0 && res)
    take(res, out);
  else {
    lr_fmt(err, errlen, "looking up %s: %s", host, gai_strerror(e ? e : EAI_NONAME));
    rc = LR_FLEET_E_CONNECT;
  }
  if (res) freeaddrinfo(res);
  free(r->pending);
  r->pending = NULL;
  return rc;
}

lr_fleet_code lr_resolve(lr_resolver *r, const char *host, int port, int64_t deadline_ms,
                         lr_waiter *w, lr_addresses *out, char *err, size_t errlen) {
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  int e = getaddrinfo(host, service, &hints, &res); /* no I/O: numeric only */
  if (e == 0) {
    take(res, out);
    freeaddrinfo(res);
    return LR_FLEET_OK;
  }
  return resolve_name(r, host, service, deadline_ms, w, out, err, errlen);
}

void lr_resolver_close(lr_resolver *r) {
  if (!r->pending) return;
  if (gai_cancel(&r->pending->cb) == EAI_NOTCANCELED) {
    const struct gaicb *list[1] = { &r->pending->cb };
    while (gai_error(&r->pending->cb) == EAI_INPROGRESS) gai_suspend(list, 1, NULL);
  }
  if (gai_error(&r->pending->cb) == 0 && r->pending->cb.ar_result)
    freeaddrinfo(r->pending->cb.ar_result);
  free(r->pending);
  r->pending = NULL;
}
