/* redis_conn.c: one connection to Redis in which nothing waits without a
 * deadline.  hiredis 0.14 bounds nothing itself (redisCommand blocks for
 * ever on a server that accepted and went quiet), and it write()s, which
 * kills the host with SIGPIPE when the server has gone.  So the socket is
 * ours: a non-blocking connect and send(MSG_NOSIGNAL)/recv() under our own
 * poll() deadlines, and hiredis does what it is good at, formatting
 * commands (redisFormatCommandArgv) and parsing replies (redisReader). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <hiredis.h>

#include "fleet_internal.h"

void lr_conn_init(lr_redis_conn *c) {
  memset(c, 0, sizeof *c);
  c->fd = -1;
}

void lr_conn_close(lr_redis_conn *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  if (c->reader) redisReaderFree(c->reader);
  c->reader = NULL;
  free(c->out);
  c->out = NULL;
  c->out_len = c->out_sent = 0;
  c->awaited = 0;
}

void lr_conn_free(lr_redis_conn *c) {
  lr_conn_close(c);
  lr_resolver_close(&c->resolver);
}

/* 1 when fd is ready for `events`, 0 at the deadline, -1 on an error. */
static int wait_fd(int fd, short events, int64_t deadline_ms) {
  for (int rounds = 0; rounds < 10000; rounds++) {
    int64_t left = deadline_ms - lr_monotonic_ms();
    if (left <= 0) return 0;
    struct pollfd p = { fd, events, 0 };
    int n = poll(&p, 1, left > 60000 ? 60000 : (int)left);
    if (n > 0) return 1;
    if (n < 0 && errno != EINTR) return -1;
  }
  return 0;
}

static lr_fleet_code addresses_of(lr_redis_conn *c, const lr_redis_url *u,
                                  int64_t deadline, lr_addresses *a, char *err,
                                  size_t errlen) {
  memset(a, 0, sizeof *a);
  if (!u->is_unix)
    return lr_resolve(&c->resolver, u->host, u->port, deadline, a, err, errlen);
  struct sockaddr_un *un = (struct sockaddr_un *)&a->addr[0];
  un->sun_family = AF_UNIX;
  memcpy(un->sun_path, u->path, strlen(u->path) + 1);   /* fits: checked at parse */
  a->len[0] = (socklen_t)sizeof *un;
  a->count = 1;
  return LR_FLEET_OK;
}

/* One address: a connected non-blocking socket, or -1 and *e. */
static int connect_one(const struct sockaddr_storage *sa, socklen_t len,
                       int64_t deadline, int *e) {
  int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *e = errno;
    return -1;
  }
  int one = 1;
  if (sa->ss_family != AF_UNIX) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  *e = 0;
  if (connect(fd, (const struct sockaddr *)sa, len) != 0) {
    *e = errno;
    if (*e == EINPROGRESS) {
      int ready = wait_fd(fd, POLLOUT, deadline);
      socklen_t elen = sizeof *e;
      if (ready == 0) *e = ETIMEDOUT;
      else if (ready < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, e, &elen) != 0) *e = errno;
    }
  }
  if (*e == 0) return fd;
  close(fd);
  return -1;
}

/* Each address in turn (a refusal moves on at once), all by the deadline. */
static lr_fleet_code connect_socket(lr_redis_conn *c, const lr_redis_url *u,
                                    int64_t deadline, char *err, size_t errlen) {
  lr_addresses a;
  lr_fleet_code rc = addresses_of(c, u, deadline, &a, err, errlen);
  if (rc != LR_FLEET_OK) return rc;
  int e = ENOENT;
  for (int i = 0; i < a.count && c->fd < 0; i++) {
    if (i > 0 && lr_monotonic_ms() >= deadline) break;
    c->fd = connect_one(&a.addr[i], a.len[i], deadline, &e);
  }
  if (c->fd >= 0) return LR_FLEET_OK;
  lr_fmt(err, errlen, "connect: %s", e == ETIMEDOUT ? "no answer in time" : strerror(e));
  return e == ETIMEDOUT ? LR_FLEET_E_TIMEOUT : LR_FLEET_E_CONNECT;
}

lr_fleet_code lr_conn_append(lr_redis_conn *c, int argc, const char **argv,
                             const size_t *lens) {
  char *cmd = NULL;
  int n = redisFormatCommandArgv(&cmd, argc, argv, lens);
  if (n < 0 || !cmd) return LR_FLEET_E_NOMEM;
  char *grown = realloc(c->out, c->out_len + (size_t)n);
  if (!grown) {
    redisFreeCommand(cmd);
    return LR_FLEET_E_NOMEM;
  }
  memcpy(grown + c->out_len, cmd, (size_t)n);
  redisFreeCommand(cmd);
  c->out = grown;
  c->out_len += (size_t)n;
  c->awaited++;
  return LR_FLEET_OK;
}

lr_fleet_code lr_conn_flush(lr_redis_conn *c, int64_t deadline_ms, char *err,
                            size_t errlen) {
  if (c->fd < 0) return LR_FLEET_E_CONNECT;
  while (c->out_sent < c->out_len) {
    ssize_t n = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c->out_sent += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (deadline_ms == 0) return LR_FLEET_OK;   /* the rest goes next time */
      int ready = wait_fd(c->fd, POLLOUT, deadline_ms);
      if (ready > 0) continue;
      lr_fmt(err, errlen, "sending: %s", ready == 0 ? "no room in time" : strerror(errno));
      return ready == 0 ? LR_FLEET_E_TIMEOUT : LR_FLEET_E_CONNECT;
    }
    lr_fmt(err, errlen, "sending: %s", n < 0 ? strerror(errno) : "nothing sent");
    return LR_FLEET_E_CONNECT;
  }
  c->out_len = c->out_sent = 0;
  return LR_FLEET_OK;
}

/* Feeds what has arrived to the reader: OK (maybe nothing: *got 0). */
static lr_fleet_code receive(lr_redis_conn *c, int *got, char *err, size_t errlen) {
  char buf[4096];
  ssize_t n;
  do n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  *got = 0;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return LR_FLEET_OK;
  if (n <= 0) {
    lr_fmt(err, errlen, "receiving: %s",
                 n == 0 ? "the server closed the connection" : strerror(errno));
    return LR_FLEET_E_CONNECT;
  }
  if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK) return LR_FLEET_E_NOMEM;
  *got = 1;
  return LR_FLEET_OK;
}

lr_fleet_code lr_conn_read(lr_redis_conn *c, int64_t deadline_ms,
                           struct redisReply **reply, char *err, size_t errlen) {
  *reply = NULL;
  if (c->fd < 0 || !c->reader) return LR_FLEET_E_CONNECT;
  lr_fleet_code rc = lr_conn_flush(c, deadline_ms, err, errlen);
  for (int rounds = 0; rc == LR_FLEET_OK && rounds < 100000; rounds++) {
    void *r = NULL;
    if (redisReaderGetReply(c->reader, &r) != REDIS_OK) {
      lr_fmt(err, errlen, "reading a reply: %s", c->reader->errstr);
      return LR_FLEET_E_PROTOCOL;
    }
    if (r) {
      c->awaited--;
      *reply = r;
      return LR_FLEET_OK;
    }
    int got = 0;
    rc = receive(c, &got, err, errlen);
    if (rc != LR_FLEET_OK || got) continue;
    if (deadline_ms == 0) return LR_FLEET_OK;     /* not arrived yet */
    int ready = wait_fd(c->fd, POLLIN, deadline_ms);
    if (ready == 0) {
      lr_fmt(err, errlen, "no reply in time");
      return LR_FLEET_E_TIMEOUT;
    }
    if (ready < 0) {
      lr_fmt(err, errlen, "receiving: %s", strerror(errno));
      return LR_FLEET_E_CONNECT;
    }
  }
  return rc;
}

static int starts(const redisReply *r, const char *prefix) {
  return r->str && strncmp(r->str, prefix, strlen(prefix)) == 0;
}

lr_fleet_code lr_conn_error_code(const redisReply *r) {
  if (!r || r->type != REDIS_REPLY_ERROR) return LR_FLEET_OK;
  if (starts(r, "NOAUTH") || starts(r, "WRONGPASS") || starts(r, "ERR invalid password") ||
      starts(r, "ERR AUTH") || starts(r, "ERR Client sent AUTH"))
    return LR_FLEET_E_AUTH;
  return LR_FLEET_E_REFUSED;
}

/* AUTH and SELECT in one write; the first error reply wins. */
static lr_fleet_code hello(lr_redis_conn *c, const lr_redis_url *u,
                           int64_t deadline, char *err, size_t errlen) {
  char db[16];
  lr_fmt(db, sizeof db, "%d", u->db);
  const char *auth[3] = { "AUTH", u->user, u->password };
  const char *select[2] = { "SELECT", db };
  lr_fleet_code rc = LR_FLEET_OK;
  if (u->password[0] || u->user[0])
    rc = u->user[0] ? lr_conn_append(c, 3, auth, NULL)
                    : lr_conn_append(c, 2, (const char *[]){ "AUTH", u->password }, NULL);
  if (rc == LR_FLEET_OK && u->db != 0) rc = lr_conn_append(c, 2, select, NULL);
  lr_fleet_code first = LR_FLEET_OK;
  while (rc == LR_FLEET_OK && c->awaited > 0) {
    redisReply *r = NULL;
    rc = lr_conn_read(c, deadline, &r, err, errlen);
    if (rc != LR_FLEET_OK) break;
    if (first == LR_FLEET_OK && r->type == REDIS_REPLY_ERROR) {
      first = lr_conn_error_code(r);
      lr_fmt(err, errlen, "%s refused: %.*s", c->awaited == 0 && u->db != 0 ?
                   "SELECT" : "AUTH", (int)(r->len > 200 ? 200 : r->len), r->str);
      lr_redis_url_scrub(u, err);
    }
    freeReplyObject(r);
  }
  return rc != LR_FLEET_OK ? rc : first;
}

lr_fleet_code lr_conn_open(lr_redis_conn *c, const lr_redis_url *u,
                           int64_t connect_deadline, int command_timeout_ms,
                           char *err, size_t errlen) {
  lr_conn_close(c);
  lr_fleet_code rc = connect_socket(c, u, connect_deadline, err, errlen);
  if (rc != LR_FLEET_OK) return rc;
  c->reader = redisReaderCreate();
  if (!c->reader) {
    lr_conn_close(c);
    return LR_FLEET_E_NOMEM;
  }
  rc = hello(c, u, lr_monotonic_ms() + command_timeout_ms, err, errlen);
  if (rc != LR_FLEET_OK) lr_conn_close(c);
  return rc;
}
