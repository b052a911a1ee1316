/* redis_sentinel.c: a redis-sentinel:// URL's master, found by asking its
 * sentinels (SENTINEL get-master-addr-by-name) and checked to be one (its
 * INFO replication's role, redis_conn.c).  Nothing is cached across
 * connections: every connect asks again, so a failover is followed by the
 * first reconnect after it (a connection error, a READONLY reply or a
 * role that is not master all close the connection: redis_conn.c,
 * handle.c).  Each sentinel gets an equal share of the time left, so a
 * silent one cannot use up the others'. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis.h>

#include "fleet_internal.h"

/* A HOST a sentinel named: printable, no spaces, fits. */
static int good_host(const redisReply *r, size_t size) {
  if (r->type != REDIS_REPLY_STRING || r->len == 0 || (size_t)r->len >= size) return 0;
  for (size_t i = 0; i < (size_t)r->len; i++)
    if (!isgraph((unsigned char)r->str[i])) return 0;
  return 1;
}

static int good_port(const redisReply *r, int *port) {
  if (r->type != REDIS_REPLY_STRING || r->len == 0 || r->len > 5) return 0;
  long v = 0;
  for (size_t i = 0; i < (size_t)r->len; i++) {
    if (!isdigit((unsigned char)r->str[i])) return 0;
    v = v * 10 + (r->str[i] - '0');
  }
  if (v < 1 || v > 65535) return 0;
  *port = (int)v;
  return 1;
}

/* The reply to get-master-addr-by-name: OK and m's host and port. */
static lr_fleet_code decode_addr(const lr_redis_url *u, const redisReply *r, lr_redis_url *m,
                                 char *err, size_t errlen) {
  if (r->type == REDIS_REPLY_ERROR) {
    char text[204];
    lr_reply_quote(u, r, text, sizeof text);
    lr_fmt(err, errlen, "SENTINEL refused: %s", text);
    return lr_conn_error_code(r);
  }
  if (r->type == REDIS_REPLY_NIL) {
    lr_fmt(err, errlen, "knows no master named %s", u->master);
    return LR_FLEET_E_REFUSED;
  }
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
      !good_host(r->element[0], sizeof m->host) || !good_port(r->element[1], &m->port)) {
    lr_fmt(err, errlen, "answered no HOST PORT pair for master %s", u->master);
    return LR_FLEET_E_PROTOCOL;
  }
  memcpy(m->host, r->element[0]->str, r->element[0]->len);
  m->host[r->element[0]->len] = '\0';
  return LR_FLEET_OK;
}

/* One sentinel, by `by`: connect, ask, read. */
static lr_fleet_code ask_one(lr_redis_conn *c, const lr_redis_url *u, int i, int64_t by,
                             lr_redis_url *m, char *err, size_t errlen) {
  lr_redis_url s;
  memset(&s, 0, sizeof s);
  memcpy(s.host, u->sentinel_host[i], sizeof s.host);
  s.port = u->sentinel_port[i];
  int64_t cmd_by = by;
  int left = (int)(by - lr_monotonic_ms());
  lr_fleet_code rc = lr_conn_open(c, &s, 0, by, left > 0 ? left : 1, &cmd_by, err, errlen);
  const char *argv[3] = { "SENTINEL", "get-master-addr-by-name", u->master };
  if (rc == LR_FLEET_OK) rc = lr_conn_append(c, 3, argv, NULL);
  redisReply *r = NULL;
  if (rc == LR_FLEET_OK) rc = lr_conn_read(c, cmd_by, &r, err, errlen);
  if (rc == LR_FLEET_OK) rc = decode_addr(u, r, m, err, errlen);
  if (r) freeReplyObject(r);
  lr_conn_close(c);
  return rc;
}

lr_fleet_code lr_sentinel_master(lr_redis_conn *c, const lr_redis_url *u, int64_t deadline_ms,
                                 lr_redis_url *master, char *err, size_t errlen) {
  *master = *u;
  master->sentinels = 0;
  lr_fleet_code rc = LR_FLEET_E_TIMEOUT;
  char why[300] = "no time left to ask";
  int n = u->sentinels, first = c->sentinel_first % n, asked = 0;
  for (int k = 0; k < n; k++) {
    int i = (first + k) % n;
    int64_t now = lr_monotonic_ms();
    if (now >= deadline_ms) break;
    if (c->cancel && atomic_load(&c->cancel->cancelled)) {
      rc = LR_FLEET_E_CANCELLED;
      lr_fmt(why, sizeof why, "the call was cancelled");
      break;
    }
    char one[300] = "";
    asked++;
    rc = ask_one(c, u, i, now + (deadline_ms - now) / (n - k), master, one, sizeof one);
    if (rc == LR_FLEET_OK) {
      c->sentinel_first = i;
      return LR_FLEET_OK;
    }
    lr_fmt(why, sizeof why,
           strchr(u->sentinel_host[i], ':') ? "sentinel [%s]:%d: %s" : "sentinel %s:%d: %s",
           u->sentinel_host[i], u->sentinel_port[i], one);
    if (rc == LR_FLEET_E_CANCELLED) break;
  }
  lr_fmt(err, errlen, "no master %s from %d of %d sentinels (last: %s)", u->master, asked, n, why);
  return rc == LR_FLEET_E_CANCELLED || rc == LR_FLEET_E_TIMEOUT ? rc : LR_FLEET_E_CONNECT;
}

/* A cluster's node that an ASK or MOVED named (the URL's credentials and
 * DB); a MOVED's that cannot be reached is forgotten: the next connect
 * goes to the URL's node, which says where the slot is now. */
static lr_fleet_code open_redirected(lr_redis_conn *c, const lr_redis_url *u,
                                     int64_t connect_deadline, int command_timeout_ms,
                                     int64_t *command_deadline, char *err, size_t errlen) {
  lr_redis_url *m = malloc(sizeof *m);
  if (!m) return LR_FLEET_E_NOMEM;
  *m = *u;
  int ask = c->ask_port != 0;
  const char *host = ask ? c->ask_host : c->moved_host;
  if (host[0]) /* "": the URL's own, a redirect's that named no host */
    memcpy(m->host, host, sizeof m->host);
  m->port = ask ? c->ask_port : c->moved_port;
  m->is_unix = 0;
  char why[300] = "";
  lr_fleet_code rc =
    lr_conn_open(c, m, 0, connect_deadline, command_timeout_ms, command_deadline, why, sizeof why);
  if (rc == LR_FLEET_OK) c->asking = ask;
  if (rc != LR_FLEET_OK) {
    if (!ask) c->moved_port = 0;
    lr_fmt(err, errlen, strchr(m->host, ':') ? "%s [%s]:%d: %s" : "%s %s:%d: %s",
           ask ? "ASK's node" : "MOVED's node", m->host, m->port, why);
  }
  free(m);
  return rc;
}

lr_fleet_code lr_redis_open(lr_redis_conn *c, const lr_redis_url *u, int64_t connect_deadline,
                            int command_timeout_ms, int64_t *command_deadline, char *err,
                            size_t errlen) {
  if (!u->sentinels && (c->ask_port || c->moved_port)) /* redis_cluster.c */
    return open_redirected(c, u, connect_deadline, command_timeout_ms, command_deadline, err,
                           errlen);
  if (!u->sentinels)
    return lr_conn_open(c, u, 0, connect_deadline, command_timeout_ms, command_deadline, err,
                        errlen);
  lr_conn_close(c);
  lr_redis_url *m = malloc(sizeof *m);
  if (!m) return LR_FLEET_E_NOMEM;
  lr_fleet_code rc = lr_sentinel_master(c, u, connect_deadline, m, err, errlen);
  if (rc == LR_FLEET_OK) {
    char why[300] = "";
    rc = lr_conn_open(c, m, 1, connect_deadline, command_timeout_ms, command_deadline, why,
                      sizeof why);
    if (rc != LR_FLEET_OK)
      lr_fmt(err, errlen,
             strchr(m->host, ':') ? "master %s at [%s]:%d: %s" : "master %s at %s:%d: %s",
             u->master, m->host, m->port, why);
  }
  free(m);
  return rc;
}
