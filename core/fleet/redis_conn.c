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
  c->slot = -1;
}

void lr_conn_close(lr_redis_conn *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  if (c->reader) lr_reply_reader_free(c->reader);
  c->reader = NULL;
  free(c->out);
  c->out = NULL;
  c->out_len = c->out_sent = 0;
  c->awaited = 0;
  c->asking = c->skip = c->dropped = 0;
}

void lr_conn_free(lr_redis_conn *c) {
  lr_conn_close(c);
  lr_resolver_close(&c->resolver);
}

#define WAIT_CANCELLED (-2)

/* 1 when fd is ready for `events`, 0 at the deadline, -1 on an error,
 * WAIT_CANCELLED when the call `w` (NULL: none) is cancelled: its eventfd
 * is polled beside fd, so a cancel (a stop signal's, another thread's)
 * ends the wait at once. */
static int wait_fd(int fd, short events, int64_t deadline_ms, lr_waiter *w) {
  int wfd = w ? lr_waiter_fd(w) : -1;
  for (int rounds = 0; rounds < 10000; rounds++) {
    if (w && atomic_load(&w->cancelled)) return WAIT_CANCELLED;
    int64_t left = deadline_ms - lr_monotonic_ms();
    if (left <= 0) { /* what came while this thread was not running came in time */
      struct pollfd late = { fd, events, 0 };
      return poll(&late, 1, 0) > 0 && late.revents ? 1 : 0;
    }
    /* without an eventfd a cancel is seen within 20 ms */
    int slice = w && wfd < 0 ? 20 : 60000;
    struct pollfd p[2] = { { fd, events, 0 }, { wfd, POLLIN, 0 } };
    int n = poll(p, wfd >= 0 ? 2 : 1, left > slice ? slice : (int)left);
    if (n > 0 && p[0].revents) return 1;
    if (n < 0 && errno != EINTR) return -1;
  }
  return 0;
}

static lr_fleet_code addresses_of(lr_redis_conn *c, const lr_redis_url *u, int64_t deadline,
                                  lr_addresses *a, char *err, size_t errlen) {
  memset(a, 0, sizeof *a);
  if (!u->is_unix)
    return lr_resolve(&c->resolver, u->host, u->port, deadline, c->cancel, a, err, errlen);
  struct sockaddr_un *un = (struct sockaddr_un *)&a->addr[0];
  un->sun_family = AF_UNIX;
  memcpy(un->sun_path, u->path, strlen(u->path) + 1); /* fits: checked at parse */
  a->len[0] = (socklen_t)sizeof *un;
  a->count = 1;
  return LR_FLEET_OK;
}

/* One address: a connected non-blocking socket, or -1 and *e. */
static int connect_one(const struct sockaddr_storage *sa, socklen_t len, int64_t deadline,
                       lr_waiter *w, int *e) {
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
      int ready = wait_fd(fd, POLLOUT, deadline, w);
      socklen_t elen = sizeof *e;
      if (ready == 0)
        *e = ETIMEDOUT;
      else if (ready == WAIT_CANCELLED)
        *e = ECANCELED;
      else if (ready < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, e, &elen) != 0)
        *e = errno;
    }
  }
  if (*e == 0) return fd;
  close(fd);
  return -1;
}

/* Each address in turn (a refusal moves on at once), all by the deadline. */
static lr_fleet_code connect_socket(lr_redis_conn *c, const lr_redis_url *u, int64_t deadline,
                                    char *err, size_t errlen) {
  lr_addresses a;
  lr_fleet_code rc = addresses_of(c, u, deadline, &a, err, errlen);
  if (rc != LR_FLEET_OK) return rc;
  int e = ENOENT;
  for (int i = 0; i < a.count && c->fd < 0; i++) {
    if (i > 0 && lr_monotonic_ms() >= deadline) break;
    c->fd = connect_one(&a.addr[i], a.len[i], deadline, c->cancel, &e);
    if (e == ECANCELED) break;
  }
  if (c->fd >= 0) return LR_FLEET_OK;
  if (e == ECANCELED) {
    lr_fmt(err, errlen, "connect: the call was cancelled");
    return LR_FLEET_E_CANCELLED;
  }
  lr_fmt(err, errlen, "connect: %s", e == ETIMEDOUT ? "no answer in time" : strerror(e));
  return e == ETIMEDOUT ? LR_FLEET_E_TIMEOUT : LR_FLEET_E_CONNECT;
}

/* A wait that ended without the socket ready: why, as a code. */
static lr_fleet_code waited_in_vain(int ready, const char *doing, const char *late, char *err,
                                    size_t errlen) {
  if (ready == WAIT_CANCELLED) {
    lr_fmt(err, errlen, "%s: the call was cancelled", doing);
    return LR_FLEET_E_CANCELLED;
  }
  lr_fmt(err, errlen, "%s: %s", doing, ready == 0 ? late : strerror(errno));
  return ready == 0 ? LR_FLEET_E_TIMEOUT : LR_FLEET_E_CONNECT;
}

static lr_fleet_code append_one(lr_redis_conn *c, int argc, const char **argv, const size_t *lens) {
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
  if (c->sent) atomic_fetch_add_explicit(c->sent, 1, memory_order_relaxed);
  return LR_FLEET_OK;
}

/* On an ASK's connection every command goes after an ASKING, whose reply
 * lr_conn_read drops. */
lr_fleet_code lr_conn_append(lr_redis_conn *c, int argc, const char **argv, const size_t *lens) {
  if (c->asking) {
    lr_fleet_code rc = append_one(c, 1, (const char *[]){ "ASKING" }, NULL);
    if (rc != LR_FLEET_OK) return rc;
    c->skip++;
  }
  return append_one(c, argc, argv, lens);
}

lr_fleet_code lr_conn_flush(lr_redis_conn *c, int64_t deadline_ms, char *err, size_t errlen) {
  if (c->fd < 0) return LR_FLEET_E_CONNECT;
  while (c->out_sent < c->out_len) {
    ssize_t n =
      send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c->out_sent += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (deadline_ms == 0) return LR_FLEET_OK; /* the rest goes next time */
      int ready = wait_fd(c->fd, POLLOUT, deadline_ms, c->cancel);
      if (ready > 0) continue;
      return waited_in_vain(ready, "sending", "no room in time", err, errlen);
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
  *got = 1;
  return lr_reply_feed(c->reader, buf, (size_t)n, err, errlen);
}

/* Reads a reply past its deadline at most this many times (64 KiB): what
 * had arrived while the thread was not running (a busy machine, SIGSTOP)
 * is taken, not called late. */
#define LATE_READS 16

static lr_fleet_code no_reply(int ready, char *err, size_t errlen) {
  return waited_in_vain(ready, "receiving", "no reply in time", err, errlen);
}

/* Every round looks at the clock: a server that streams without end
 * (a line that never ends) meets the deadline like a silent one, within
 * LATE_READS reads of what it had sent by then. */
lr_fleet_code lr_conn_read(lr_redis_conn *c, int64_t deadline_ms, struct redisReply **reply,
                           char *err, size_t errlen) {
  *reply = NULL;
  if (c->fd < 0 || !c->reader) return LR_FLEET_E_CONNECT;
  lr_fleet_code rc = lr_conn_flush(c, deadline_ms, err, errlen);
  int late = 0;
  for (int rounds = 0; rc == LR_FLEET_OK; rounds++) {
    rc = lr_reply_next(c->reader, reply, err, errlen);
    if (rc != LR_FLEET_OK) return rc;
    /* ASKING and its command alternate: the first of each pair dropped */
    if (*reply && c->skip > 0 && !c->dropped) {
      c->skip--, c->awaited--, c->dropped = 1;
      freeReplyObject(*reply);
      *reply = NULL;
      continue;
    }
    if (*reply) {
      c->dropped = 0;
      c->awaited--;
      lr_cluster_note(c, *reply);
      return LR_FLEET_OK;
    }
    if (deadline_ms != 0 && (rounds > 0 || c->cancel)) {
      if (lr_monotonic_ms() >= deadline_ms) {
        if (++late > LATE_READS) return no_reply(0, err, errlen);
      } else if (c->cancel && atomic_load(&c->cancel->cancelled)) {
        return no_reply(WAIT_CANCELLED, err, errlen);
      }
    }
    int got = 0;
    rc = receive(c, &got, err, errlen);
    if (rc != LR_FLEET_OK || got) continue;
    if (late) return no_reply(0, err, errlen);
    if (deadline_ms == 0) return LR_FLEET_OK; /* not arrived yet */
    int ready = wait_fd(c->fd, POLLIN, deadline_ms, c->cancel);
    if (ready <= 0) return no_reply(ready, err, errlen);
  }
  return rc;
}

static int starts(const redisReply *r, const char *prefix) {
  return r->str && strncmp(r->str, prefix, strlen(prefix)) == 0;
}

lr_fleet_code lr_conn_error_code(const redisReply *r) {
  if (!r || r->type != REDIS_REPLY_ERROR) return LR_FLEET_OK;
  if (starts(r, "NOAUTH") || starts(r, "WRONGPASS") || starts(r, "ERR invalid password") ||
      starts(r, "ERR AUTH") || starts(r, "ERR Client sent AUTH") ||
      /* Redis 7's answer to a long command before AUTH (the sync's) */
      starts(r, "ERR Protocol error: unauthenticated"))
    return LR_FLEET_E_AUTH;
  return LR_FLEET_E_REFUSED;
}

/* The reply to INFO replication: OK when its role is master, E_REFUSED
 * (a replica: a failover under way, or one the sentinels have not seen
 * yet) with why, E_PROTOCOL when it names no role. */
static lr_fleet_code role_of(const redisReply *r, char *err, size_t errlen) {
  const char *role = NULL;
  if (r->type == REDIS_REPLY_STRING) {
    role = strstr(r->str, "role:");
    if (role && role != r->str && role[-1] != '\n') role = NULL;
  }
  if (!role) {
    lr_fmt(err, errlen, "INFO replication: no role in the reply");
    return LR_FLEET_E_PROTOCOL;
  }
  role += 5;
  size_t n = strcspn(role, "\r\n");
  if (n == 6 && strncmp(role, "master", 6) == 0) return LR_FLEET_OK;
  char text[40];
  lr_reply_escape(role, n, text, sizeof text, "");
  lr_fmt(err, errlen, "its role is %s, not master (a failover under way?)", text);
  return LR_FLEET_E_REFUSED;
}

/* AUTH, SELECT and (for a sentinel's master) INFO replication in one
 * write; the first error reply wins.  INFO, not ROLE: ROLE's reply nests
 * deeper than the bounded reader allows; an ACL user without INFO
 * (NOPERM) skips the check: a replica's READONLY reply to the update
 * sends the next connect back to the sentinels all the same. */
static lr_fleet_code hello(lr_redis_conn *c, const lr_redis_url *u, int role, int64_t deadline,
                           char *err, size_t errlen) {
  char db[16];
  lr_fmt(db, sizeof db, "%d", u->db);
  const char *auth[3] = { "AUTH", u->user, u->password };
  const char *select[2] = { "SELECT", db };
  const char *names[3];
  int n = 0;
  lr_fleet_code rc = LR_FLEET_OK;
  if (u->password[0] || u->user[0]) {
    rc = u->user[0] ? lr_conn_append(c, 3, auth, NULL)
                    : lr_conn_append(c, 2, (const char *[]){ "AUTH", u->password }, NULL);
    names[n++] = "AUTH";
  }
  if (rc == LR_FLEET_OK && u->db != 0)
    rc = lr_conn_append(c, 2, select, NULL), names[n++] = "SELECT";
  if (rc == LR_FLEET_OK && role)
    rc = lr_conn_append(c, 2, (const char *[]){ "INFO", "replication" }, NULL), names[n++] = "INFO";
  lr_fleet_code first = LR_FLEET_OK;
  for (int k = 0; rc == LR_FLEET_OK && c->awaited > 0 && k < n; k++) {
    redisReply *r = NULL;
    rc = lr_conn_read(c, deadline, &r, err, errlen);
    if (rc != LR_FLEET_OK) break;
    int info = strcmp(names[k], "INFO") == 0;
    if (info && r->type == REDIS_REPLY_ERROR && r->str && strncmp(r->str, "NOPERM", 6) == 0) {
      /* not allowed to ask: see above */
    } else if (first == LR_FLEET_OK && r->type == REDIS_REPLY_ERROR) {
      char text[204];
      lr_reply_quote(u, r, text, sizeof text);
      first = lr_conn_error_code(r);
      lr_fmt(err, errlen, "%s refused: %s", names[k], text);
    } else if (first == LR_FLEET_OK && info) {
      first = role_of(r, err, errlen);
    }
    freeReplyObject(r);
  }
  return rc != LR_FLEET_OK ? rc : first;
}

static lr_fleet_code open_one(lr_redis_conn *c, const lr_redis_url *u, int role,
                              int64_t connect_deadline, int command_timeout_ms,
                              int64_t *command_deadline, char *err, size_t errlen) {
  lr_fleet_code rc = connect_socket(c, u, connect_deadline, err, errlen);
  if (rc != LR_FLEET_OK) return rc;
  /* the round trip's time starts once connected; never past the limit */
  int64_t by = lr_monotonic_ms() + command_timeout_ms;
  if (*command_deadline <= 0 || by < *command_deadline) *command_deadline = by;
  c->reader = lr_reply_reader_new();
  if (!c->reader) {
    lr_conn_close(c);
    return LR_FLEET_E_NOMEM;
  }
  rc = hello(c, u, role, *command_deadline, err, errlen);
  if (rc != LR_FLEET_OK) lr_conn_close(c);
  return rc;
}

lr_fleet_code lr_conn_open(lr_redis_conn *c, const lr_redis_url *u, int check_role,
                           int64_t connect_deadline, int command_timeout_ms,
                           int64_t *command_deadline, char *err, size_t errlen) {
  lr_conn_close(c);
  return open_one(c, u, check_role, connect_deadline, command_timeout_ms, command_deadline, err,
                  errlen);
}
