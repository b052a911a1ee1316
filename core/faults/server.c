/*
 * server.c: a fault-injecting HTTP/1.1 server driven by a Lua script, so
 * retry policies can be tested against real sockets.  One thread, one
 * poll(2) loop, any number of connections; request parsing lives in
 * http_parse.c.
 *
 * The script API (also in policies/faults/README.md)
 * --------------------------------------------------
 * The script is Lua 5.4 in a sandbox (faults_sandbox.c: no io, no
 * os.execute; require reaches its folder and the system's Lua modules;
 * 256 MiB).  It defines
 * a global `respond(req)`, called once per request, where
 *   req.method   "GET", "POST", ...
 *   req.path     the path, without the query ("/a/b")
 *   req.query    the raw query string ("" if none)
 *   req.headers  name -> value; names are lower-case, repeats are joined
 *                with ", "
 *   req.body     the request body ("" if none; chunked bodies decoded; its
 *                first 16 MiB when longer)
 *   req.body_len the body's whole length
 *   req.count    requests seen on this path so far, this one included
 *   req.total    requests seen on all paths so far, this one included
 *   req.state    a table kept per path across requests, for the script
 *   req.time     seconds since the server started (monotonic, a float)
 * and returns a table with any of
 *   status   (200)  the status code, 100..999
 *   reason          the reason phrase (default: the usual one)
 *   headers         name -> string, or name -> list of strings to repeat
 *                   it; Content-Length and Transfer-Encoding are the
 *                   server's own and ignored here
 *   body     ("")   the body
 *   delay    (0)    seconds to wait before answering; other connections
 *                   are served meanwhile
 *   reset    = true close at once with a TCP reset (SO_LINGER 0), sending
 *                   nothing: the client sees "connection reset"
 *   hang     = true never answer; the connection stays open until the
 *                   client goes away or the server stops
 *   truncate = N    send the head with the full Content-Length but only N
 *                   bytes of the body, then close
 *   raw             the response's bytes as they are (status line, headers,
 *                   body: anything, malformed on purpose), then close
 *   stream = {data = S, count = N, interval = T}
 *                   after the head (raw or made), S sent N times (no count:
 *                   for ever), T seconds apart (0: as fast as it is read),
 *                   then close; a made head then has no Content-Length
 *   then_reset = true  end the answer with a TCP reset instead of a close
 *                   (a reset in the middle of a body, with truncate, raw or
 *                   a stream)
 * `delay` also postpones `reset` and `truncate`.  Instead of a table,
 * respond may return a status number or a body string, and `respond`
 * itself may be such a value instead of a function, answered every time.
 * A response carries "Connection: close" (and the connection is closed)
 * when the client asked for it or the script set that header.
 *
 * Helpers defined before the script runs:
 *   sequence{a, b, c}  answers entry req.count of the list; the last
 *                      entry repeats forever
 *   cycle{a, b}        the same, but starts over after the last entry
 *   routes{["/a"] = x, default = y}  dispatches on req.path (404 when
 *                      nothing matches and there is no default)
 * Their entries may be status numbers, body strings, response tables or
 * respond-like functions: `respond = sequence{503, 503, 200}`.
 *
 * A script error while answering gives a 500 with the error message as
 * its body; the server goes on serving.
 *
 * Built in, and not seen by the script nor counted:
 *   GET /_faults/requests  a JSON array of the requests seen, oldest first
 *     (the last 100000): {"n","conn" (the connection's number),"method","path","query","time","body_len",
 *     "body_hash" (FNV-1a 64, hex),"headers"}; time is taken when the
 *     request's head had arrived
 *   POST /_faults/reset    forgets the log, the counts and the states
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/sockios.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "faults_int.h"


/* ------------------------------------------------------------ connections */


/* Send what may be sent now; 0 if the connection died. */
static int conn_flush (lr_faults *f, conn *c) {
  size_t limit = c->state == C_DELAY ? c->hold : c->out.len;
  if (c->out.oom) { fault_conn_close(f, c, 0); return 0; }
  while (c->outoff < limit) {
    ssize_t n = send(c->fd, c->out.p + c->outoff, limit - c->outoff,
                     MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 1;
      fault_conn_close(f, c, 0);
      return 0;
    }
    c->outoff += (size_t)n;
  }
  if (c->outoff == c->out.len) c->outoff = c->out.len = c->hold = 0;
  return 1;
}

/* With `to` NULL, stores in offs where each pointer of r lies in the
 * buffer `from` (SIZE_MAX: elsewhere, e.g. the static ""); with `to`, points
 * them into `to` at the same offsets. */
static void rebase (lr_http_req *r, const char *from, size_t cap, size_t *offs,
                    char *to) {
  const char **ptrs[3 + 2 * LR_HTTP_MAX_HEADERS];
  size_t n = 0;
  ptrs[n++] = &r->method;
  ptrs[n++] = &r->path;
  ptrs[n++] = &r->query;
  for (size_t i = 0; i < r->nheaders; i++) {
    ptrs[n++] = (const char **)&r->headers[i].name;
    ptrs[n++] = (const char **)&r->headers[i].value;
  }
  for (size_t i = 0; i < n; i++) {
    if (!to) {
      uintptr_t at = (uintptr_t)*ptrs[i], base = (uintptr_t)from;
      offs[i] = *ptrs[i] && from && at >= base && at < base + cap ? at - base : SIZE_MAX;
    } else if (offs[i] != SIZE_MAX) {
      *ptrs[i] = to + offs[i];
    }
  }
}

static void conn_read (lr_faults *f, conn *c) {
  ssize_t n;
  if (c->incap - c->inlen < READ_MIN && c->incap < IN_MAX) {
    size_t cap = c->incap ? c->incap * 2 : READ_MIN * 2;
    char *p;
    if (cap > IN_MAX) cap = IN_MAX;
    /* The request parsed so far points into c->in: keep those pointers
     * as offsets across the realloc, which may move the buffer. */
    size_t offsets[3 + 2 * LR_HTTP_MAX_HEADERS];
    rebase(&c->req, c->in, c->incap, offsets, NULL);
    if ((p = realloc(c->in, cap)) == NULL) { fault_conn_close(f, c, 0); return; }
    rebase(&c->req, NULL, cap, offsets, p);
    c->in = p;
    c->incap = cap;
  }
  if (c->inlen == c->incap) { fault_conn_close(f, c, 0); return; }  /* cannot be */
  n = recv(c->fd, c->in + c->inlen, c->incap - c->inlen, 0);
  if (n > 0) c->inlen += (size_t)n;
  else if (n == 0) c->eof = 1;
  else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    fault_conn_close(f, c, 0);
}

/* A response of the server's own (errors, the built-in paths). */

static void answer_builtin (lr_faults *f, conn *c) {
  const char *what = c->req.path + strlen(BUILTIN), *m = c->req.method;
  if (strcmp(what, "requests") == 0 &&
      (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0)) {
    sbuf b = {0};
    sb_add(&b, "[", 1);
    for (size_t i = 0; i < f->log_count; i++) {
      if (i > 0) sb_add(&b, ",\n", 2);
      sb_str(&b, f->log[(f->log_first + i) % LOG_MAX]);
    }
    sb_add(&b, "]\n", 2);
    if (b.oom) fault_put_simple(c, 500, "text/plain", "out of memory\n", 14);
    else fault_put_simple(c, 200, "application/json", b.p, b.len);
    sb_free(&b);
  }
  else if (strcmp(what, "reset") == 0 && strcmp(m, "POST") == 0) {
    fault_log_clear(f);
    f->total = 0;
    f->file_bytes = 0;
    lua_pushcfunction(f->L, fault_reset_paths);
    lua_pushlightuserdata(f->L, f);
    if (lua_pcall(f->L, 1, 0, 0) != LUA_OK) {
      lua_pop(f->L, 1);
      fault_put_simple(c, 500, "text/plain", "out of memory\n", 14);
    }
    else fault_put_simple(c, 200, "application/json", "{\"ok\":true}\n", 12);
  }
  else if (strcmp(what, "stats") == 0 && strcmp(m, "GET") == 0) {
    char body[128];
    int n = snprintf(body, sizeof body, "{\"requests\":%lld,\"file_bytes\":%llu}\n", f->total,
                     f->file_bytes);
    fault_put_simple(c, 200, "application/json", body, (size_t)n);
  }
  else if (strcmp(what, "requests") == 0 || strcmp(what, "reset") == 0)
    fault_put_simple(c, 405, "text/plain", "method not allowed\n", 19);
  else fault_put_simple(c, 404, "text/plain", "not found\n", 10);
}

static void answer (lr_faults *f, conn *c) {
  lr_http_req *r = &c->req;
  c->close_after = !r->keep_alive || c->eof;
  if (strncmp(r->path, BUILTIN, strlen(BUILTIN)) == 0) answer_builtin(f, c);
  else fault_answer_script(f, c);
  if (c->state == C_DEAD) return;
  /* the request is done with: keep only what follows it */
  memmove(c->in, c->in + r->end, c->inlen - r->end);
  c->inlen -= r->end;
  memset(r, 0, sizeof *r);
  c->head_seen = 0;
  if (c->incap > 4 * READ_MIN && c->inlen < READ_MIN) {  /* after a big body */
    char *p = realloc(c->in, 2 * READ_MIN);
    if (p) { c->in = p; c->incap = 2 * READ_MIN; }
  }
}

/* Do everything that can be done without waiting. */
static void conn_advance (lr_faults *f, conn *c) {
  while (c->state != C_DEAD) {
    int st;
    if (!conn_flush(f, c)) return;
    if (c->state == C_WRITE) {
      if (c->out.len > 0) return;  /* the rest when the socket drains */
      if (c->close_after) { fault_conn_close(f, c, c->reset_at_end); return; }
      c->state = C_READ;
    }
    if (c->state != C_READ) return;
    st = lr_http_parse(&c->req, c->in, &c->inlen);
    if (c->req.head_len > 0 && !c->head_seen) {
      c->head_seen = 1;
      c->head_time = fault_elapsed(f);
      /* curl waits up to a second for this before sending the body */
      if (st == LR_HTTP_MORE && c->req.expect_continue &&
          c->req.minor == 1 && !lr_http_body_done(&c->req))
        sb_str(&c->out, "HTTP/1.1 100 Continue\r\n\r\n");
    }
    if (st == LR_HTTP_MORE) {
      if (c->eof) fault_conn_close(f, c, 0);
      else if (c->out.len > 0) continue;  /* send the 100 Continue */
      return;
    }
    if (st == LR_HTTP_DONE) answer(f, c);
    else {
      char msg[64];
      int n = snprintf(msg, sizeof msg, "%d %s\n", st, lr_http_reason(st));
      c->close_after = 1;
      fault_put_simple(c, st, "text/plain", msg, (size_t)n);
    }
  }
}

static void conn_event (lr_faults *f, conn *c, short rev) {
  if (rev == 0 || c->state == C_DEAD) return;
  if (rev & POLLNVAL) { fault_conn_close(f, c, 0); return; }
  if (c->state == C_STREAM && (rev & POLLOUT) && !conn_flush(f, c)) return;
  if (c->state == C_HANG || c->state == C_STREAM) {  /* read and drop until the client leaves */
    char tmp[4096];
    ssize_t n = (rev & (POLLIN | POLLHUP | POLLERR)) ? recv(c->fd, tmp, sizeof tmp, 0) : 1;
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
      fault_conn_close(f, c, 0);
    return;
  }
  if (c->state == C_READ && !c->eof && (rev & (POLLIN | POLLHUP | POLLERR)))
    conn_read(f, c);
  else if (rev & (POLLHUP | POLLERR)) { fault_conn_close(f, c, 0); return; }
  conn_advance(f, c);
}

static void accept_all (lr_faults *f) {
  for (;;) {
    int fd = accept4(f->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    int one = 1;
    conn *c;
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) f->accept_paused = 1;
      return;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (f->nconns == f->capconns) {
      size_t cap = f->capconns ? f->capconns * 2 : 64;
      conn **p = realloc(f->conns, cap * sizeof *p);
      if (p == NULL) { close(fd); f->accept_paused = 1; return; }
      f->conns = p;
      f->capconns = cap;
    }
    if ((c = calloc(1, sizeof *c)) == NULL) {
      close(fd);
      f->accept_paused = 1;
      return;
    }
    c->fd = fd;
    c->state = C_READ;
    c->serial = ++f->connections;
    f->conns[f->nconns++] = c;
  }
}

/* ms until `due`, rounded up, into *timeout when sooner. */
static void sooner (double due, double now, int *timeout) {
  double ms = (due - now) * 1000;
  int wait = ms <= 0 ? 0 : ms > 86400000 ? 86400000
           : (int)ms + ((double)(int)ms < ms);
  if (*timeout < 0 || wait < *timeout) *timeout = wait;
}

/* What to poll a connection for; *timeout lowered for what is due. */
static short conn_events (conn *c, double now, int *timeout) {
  switch (c->state) {
    case C_READ: return (short)((c->eof ? 0 : POLLIN) | (c->out.len ? POLLOUT : 0));
    case C_WRITE: return POLLOUT;
    case C_HANG: return POLLIN;
    case C_DELAY:
      sooner(c->due, now, timeout);
      return c->outoff < c->hold ? POLLOUT : 0;
    case C_STREAM:
      if (c->out.len) return POLLIN | POLLOUT;
      sooner(c->due, now, timeout);
      return POLLIN;
  }
  return 0;
}

#define STREAM_BATCH (256 * 1024)  /* what one turn queues of a stream with no interval */

/* A stream's next piece once the last one is out and it is due; the close
 * after its last. */
/* A `file` answer's next bytes; at its end the connection goes on (or is
 * reset at the cut). */
static void file_next (lr_faults *f, conn *c, double now) {
  unsigned long long stop = c->file_cut < c->file_end ? c->file_cut : c->file_end;
  if (c->file_pos >= stop) {
    int unsent = 0;
    if (c->file_cut <= c->file_pos && ioctl(c->fd, SIOCOUTQ, &unsent) == 0 && unsent > 0) {
      if (c->cut_since == 0) c->cut_since = now;
      if (now - c->cut_since < 1) {  /* a reset would drop what is in flight */
        c->due = now + 0.002;
        return;
      }
    }
    c->file_on = 0;
    c->cut_since = 0;
    if (c->file_cut <= c->file_pos || c->reset_at_end) { fault_conn_close(f, c, 1); return; }
    c->state = C_WRITE;
    conn_advance(f, c);
    return;
  }
  size_t n = stop - c->file_pos < STREAM_BATCH ? (size_t)(stop - c->file_pos) : STREAM_BATCH;
  unsigned char buf[4096];
  for (size_t done = 0; done < n;) {
    size_t k = n - done < sizeof buf ? n - done : sizeof buf;
    for (size_t j = 0; j < k; j++) buf[j] = fault_file_byte(c->file_pos + done + j, c->file_seed);
    sb_add(&c->out, buf, k);
    done += k;
  }
  c->file_pos += n;
  f->file_bytes += n;
  conn_flush(f, c);
}

static void stream_next (lr_faults *f, conn *c, double now) {
  if (c->out.len || c->due > now) return;
  if (c->file_on) { file_next(f, c, now); return; }
  if (c->stream_left == 0) { fault_conn_close(f, c, c->reset_at_end); return; }
  do {
    sb_add(&c->out, c->stream, c->stream_len);
    if (c->stream_left > 0) c->stream_left--;
  } while (c->stream_every == 0 && c->stream_left != 0 && c->out.len < STREAM_BATCH);
  c->due = now + c->stream_every;
  conn_flush(f, c);
}

/* What time made due: a delayed answer, a stream's next piece. */
static void conn_due (lr_faults *f, conn *c, double now) {
  if (c->state == C_STREAM) { stream_next(f, c, now); return; }
  if (c->state != C_DELAY || c->due > now) return;
  if (c->reset_when_due) fault_conn_close(f, c, 1);
  else {
    c->state = c->stream || c->file_on ? C_STREAM : C_WRITE;
    c->due = now;
    if (c->state == C_STREAM) stream_next(f, c, now);
    else conn_advance(f, c);
  }
}

int lr_faults_serve (lr_faults *f) {
  for (;;) {
    size_t n = f->nconns, i, j;
    int timeout = -1, ready;
    double now = fault_elapsed(f);
    if (f->cappfds < n + 2) {
      size_t cap = (n + 2) * 2;
      struct pollfd *p = realloc(f->pfds, cap * sizeof *p);
      if (p == NULL) { errno = ENOMEM; return -1; }
      f->pfds = p;
      f->cappfds = cap;
    }
    f->pfds[0] = (struct pollfd){f->wake_fd, POLLIN, 0};
    f->pfds[1] = (struct pollfd){f->accept_paused ? -1 : f->listen_fd, POLLIN, 0};
    if (f->accept_paused) timeout = 100;
    for (i = 0; i < n; i++)
      f->pfds[i + 2] = (struct pollfd){f->conns[i]->fd, conn_events(f->conns[i], now, &timeout), 0};
    ready = poll(f->pfds, n + 2, timeout);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (f->pfds[0].revents) return 0;  /* the eventfd stays set: stop sticks */
    f->accept_paused = 0;
    if (f->pfds[1].revents & POLLIN) accept_all(f);
    for (i = 0; i < n; i++) conn_event(f, f->conns[i], f->pfds[i + 2].revents);
    now = fault_elapsed(f);
    for (i = 0; i < f->nconns; i++) conn_due(f, f->conns[i], now);
    for (i = j = 0; i < f->nconns; i++) {
      if (f->conns[i]->state == C_DEAD) free(f->conns[i]);
      else f->conns[j++] = f->conns[i];
    }
    f->nconns = j;
  }
}


/* ------------------------------------------------------------ set up */

/* Split "HOST:PORT", "[V6]:PORT", ":PORT", "PORT" or "HOST". */
static int split_listen (const char *addr, char *host, size_t hostlen,
                         char *port, size_t portlen) {
  const char *colon, *h = addr, *p = NULL;
  size_t hl;
  snprintf(port, portlen, "0");
  if (addr[0] == '[') {
    const char *rb = strchr(addr, ']');
    if (rb == NULL || (rb[1] != '\0' && rb[1] != ':')) return -1;
    h = addr + 1;
    hl = (size_t)(rb - h);
    colon = rb[1] ? rb + 1 : NULL;
  }
  else if ((colon = strrchr(addr, ':')) != NULL) {
    if (memchr(addr, ':', (size_t)(colon - addr))) return -1;  /* bare v6 */
    hl = (size_t)(colon - addr);
  }
  else if (addr[strspn(addr, "0123456789")] == '\0') {
    hl = 0;  /* just a port */
    colon = NULL;
    p = addr;
  }
  else hl = strlen(addr);
  if (colon) p = colon + 1;
  if (p) {
    size_t digits = strspn(p, "0123456789");
    if (digits == 0 || digits > 5 || p[digits] != '\0' || atoi(p) > 65535)
      return -1;
    snprintf(port, portlen, "%s", p);
  }
  if (hl == 0) { h = "127.0.0.1"; hl = 9; }  /* never all interfaces by default */
  if (hl >= hostlen) return -1;
  memcpy(host, h, hl);
  host[hl] = '\0';
  return 0;
}

static int is_loopback (const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6) {
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a) ||
           (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
  }
  return 0;
}

int lr_faults_is_loopback (const lr_faults *f) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (!f || getsockname(f->listen_fd, (struct sockaddr *)&ss, &len) != 0) return 0;
  return is_loopback((const struct sockaddr *)&ss);
}

/* f->port and f->address ("127.0.0.1:PORT", "[::1]:PORT") from the socket
 * bound, so port 0 shows the port the kernel chose. */
static void name_bound (lr_faults *f) {
  struct sockaddr_storage ss;
  socklen_t sslen = sizeof ss;
  getsockname(f->listen_fd, (struct sockaddr *)&ss, &sslen);
  if (ss.ss_family == AF_INET6) {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    char a[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof a);
    f->port = ntohs(s6->sin6_port);
    snprintf(f->address, sizeof f->address, "[%s]:%d", a, f->port);
  }
  else {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    char a[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &s4->sin_addr, a, sizeof a);
    f->port = ntohs(s4->sin_port);
    snprintf(f->address, sizeof f->address, "%s:%d", a, f->port);
  }
}

static int bind_listen (lr_faults *f, const char *addr, int any, char *err,
                        size_t errlen) {
  char host[256], port[8];
  struct addrinfo hints, *res = NULL;
  int rc, saved = EADDRNOTAVAIL, refused = 0;
  if (addr == NULL) addr = "127.0.0.1:0";
  if (split_listen(addr, host, sizeof host, port, sizeof port) != 0) {
    snprintf(err, errlen, "bad listen address '%s' (expected HOST:PORT)",
             addr);
    return -1;
  }
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  if ((rc = getaddrinfo(host, port, &hints, &res)) != 0) {
    snprintf(err, errlen, "cannot listen on %s: %s", addr, gai_strerror(rc));
    return -1;
  }
  /* IPv4 first, so "localhost" means 127.0.0.1 where both exist */
  for (int pass = 0; pass < 2 && f->listen_fd < 0; pass++)
    for (struct addrinfo *a = res; a && f->listen_fd < 0; a = a->ai_next) {
      int fd, one = 1;
      if ((a->ai_family == AF_INET) != (pass == 0)) continue;
      /* a script anyone could drive, on the LAN or the internet: only
         when asked for */
      if (!any && !is_loopback(a->ai_addr)) { refused = 1; continue; }
      fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                  a->ai_protocol);
      if (fd < 0) { saved = errno; continue; }
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 ||
          listen(fd, SOMAXCONN) != 0) {
        saved = errno;
        close(fd);
        continue;
      }
      f->listen_fd = fd;
    }
  freeaddrinfo(res);
  if (f->listen_fd < 0 && refused) {
    snprintf(err, errlen, "will not listen on %s: not a loopback address (anyone who can "
             "reach it could drive the script; --listen-any if that is meant)", addr);
    return -1;
  }
  if (f->listen_fd < 0) {
    snprintf(err, errlen, "cannot listen on %s: %s", addr, strerror(saved));
    return -1;
  }
  name_bound(f);
  return 0;
}

static lr_faults *open_any (const char *path, const char *chunkname,
                            const char *source, const char *listen, int any,
                            char *err, size_t errlen) {
  lr_faults *f = calloc(1, sizeof *f);
  if (f == NULL) { snprintf(err, errlen, "out of memory"); return NULL; }
  atomic_init(&f->stopping, 0);
  f->listen_fd = -1;
  f->wake_fd = -1;
  clock_gettime(CLOCK_MONOTONIC, &f->t0);
  if (fault_load_script(f, path, chunkname, source, err, errlen) != 0 ||
      bind_listen(f, listen, any, err, errlen) != 0) {
    lr_faults_free(f);
    return NULL;
  }
  if ((f->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
    snprintf(err, errlen, "eventfd: %s", strerror(errno));
    lr_faults_free(f);
    return NULL;
  }
  return f;
}

lr_faults *lr_faults_open (const char *script_path, const char *listen,
                           char *err, size_t errlen) {
  if (script_path == NULL) { snprintf(err, errlen, "no script"); return NULL; }
  return open_any(script_path, NULL, NULL, listen, 0, err, errlen);
}

lr_faults *lr_faults_open_any (const char *script_path, const char *listen,
                               char *err, size_t errlen) {
  if (script_path == NULL) { snprintf(err, errlen, "no script"); return NULL; }
  return open_any(script_path, NULL, NULL, listen, 1, err, errlen);
}

lr_faults *lr_faults_open_string (const char *chunkname, const char *source,
                                  const char *listen, char *err,
                                  size_t errlen) {
  if (source == NULL) { snprintf(err, errlen, "no script"); return NULL; }
  if (chunkname == NULL || chunkname[0] == '\0') chunkname = "=script";
  return open_any(NULL, chunkname, source, listen, 0, err, errlen);
}

static void *serve_thread (void *arg) {
  lr_faults_serve((lr_faults *)arg);
  return NULL;
}

static lr_faults *start (lr_faults *f, char *err, size_t errlen) {
  int rc;
  if (f == NULL) return NULL;
  if ((rc = pthread_create(&f->thread, NULL, serve_thread, f)) != 0) {
    snprintf(err, errlen, "cannot start the server thread: %s", strerror(rc));
    lr_faults_free(f);
    return NULL;
  }
  f->threaded = 1;
  return f;
}

lr_faults *lr_faults_start_string (const char *chunkname, const char *source,
                                   const char *listen, char *err,
                                   size_t errlen) {
  return start(lr_faults_open_string(chunkname, source, listen, err, errlen),
               err, errlen);
}

int lr_faults_port (const lr_faults *f) { return f ? f->port : 0; }

const char *lr_faults_address (const lr_faults *f) {
  return f ? f->address : "";
}

void lr_faults_stop (lr_faults *f) {
  int saved = errno;  /* may run in a signal handler */
  uint64_t one = 1;
  if (f) atomic_store(&f->stopping, 1);  /* a looping script sees it too */
  if (f && f->wake_fd >= 0 && write(f->wake_fd, &one, sizeof one) < 0) {
    /* only fails when the counter is saturated: already stopping */
  }
  errno = saved;
}

void lr_faults_free (lr_faults *f) {
  if (f == NULL) return;
  if (f->threaded) {
    lr_faults_stop(f);
    pthread_join(f->thread, NULL);
  }
  for (size_t i = 0; i < f->nconns; i++) {
    conn *c = f->conns[i];
    if (c->state != C_DEAD) { close(c->fd); free(c->in); sb_free(&c->out); }
    free(c);
  }
  free(f->conns);
  free(f->pfds);
  if (f->log) { fault_log_clear(f); free(f->log); }
  if (f->L) lua_close(f->L);
  if (f->listen_fd >= 0) close(f->listen_fd);
  if (f->wake_fd >= 0) close(f->wake_fd);
  free(f);
}
