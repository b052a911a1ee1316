/* conn.c: what every part of the fault server writes with: growing
 * buffers, a connection's clock, its answer and its close. */
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
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "faults_int.h"

/* ------------------------------------------------------------ buffers */

void sb_add(sbuf *b, const void *s, size_t n) {
  if (b->oom) return;
  if (b->cap - b->len < n) {
    size_t cap = b->cap ? b->cap : 256;
    char *p;
    while (cap - b->len < n) cap *= 2;
    if ((p = realloc(b->p, cap)) == NULL) {
      b->oom = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  if (n > 0) memcpy(b->p + b->len, s, n);
  b->len += n;
}

void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

void sb_fmt(sbuf *b, const char *fmt, ...) {
  char tmp[256]; /* only ever short lines */
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) sb_add(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

void sb_free(sbuf *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

double fault_elapsed(const lr_faults *f) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - f->t0.tv_sec) + (t.tv_nsec - f->t0.tv_nsec) / 1e9;
}

void fault_conn_close(lr_faults *f, conn *c, int hard) {
  if (c->state == C_DEAD) return;
  if (hard) { /* the peer gets an RST instead of a FIN */
    struct linger lg = { 1, 0 };
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  } else { /* unread input would turn our FIN into an RST: read it first */
    char tmp[4096];
    for (int i = 0; i < 64 && recv(c->fd, tmp, sizeof tmp, 0) > 0; i++) {
    }
  }
  close(c->fd);
  c->fd = -1;
  c->state = C_DEAD;
  free(c->in);
  c->in = NULL;
  f->in_bytes -= c->incap;
  c->incap = c->inlen = 0;
  sb_free(&c->out);
  fault_stream_free(c);
  f->accept_paused = 0;
}

void fault_stream_free(conn *c) {
  free(c->stream);
  c->stream = NULL;
  c->stream_len = 0;
  c->stream_left = 0;
  c->file_on = 0;
}

/* A period of 251 (a prime): a part spliced at a wrong offset shows. */
unsigned char fault_file_byte(unsigned long long i, unsigned seed) {
  return (unsigned char)((i + (unsigned long long)seed * 17u) % 251u);
}

void fault_put_simple(conn *c, int status, const char *ctype, const char *body, size_t len) {
  sb_fmt(&c->out,
         "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
         "Content-Length: %zu\r\n%s\r\n",
         status, lr_http_reason(status), ctype, len, c->close_after ? "Connection: close\r\n" : "");
  if (!(c->req.method && strcmp(c->req.method, "HEAD") == 0)) sb_add(&c->out, body, len);
  c->state = C_WRITE;
}
