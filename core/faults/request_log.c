/* request_log.c: the request log, a ring of rendered JSON entries, that
 * GET /_faults/requests reads (server.c answers it). */
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

/* ------------------------------------------------------------ JSON log */

/* Length of the valid UTF-8 sequence at s, or 0. */
static size_t utf8_len(const unsigned char *s) {
  unsigned long cp;
  size_t n, i;
  if (s[0] >= 0xc2 && s[0] <= 0xdf) {
    n = 2;
    cp = s[0] & 0x1f;
  } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
    n = 3;
    cp = s[0] & 0x0f;
  } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
    n = 4;
    cp = s[0] & 0x07;
  } else
    return 0;
  for (i = 1; i < n; i++) { /* stops at a NUL: it is no continuation */
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
      (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return n;
}

/* A JSON string; bytes that are not UTF-8 are taken as Latin-1 so the
   output always parses. */
static void sb_json(sbuf *b, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  sb_add(b, "\"", 1);
  while (*p) {
    size_t n;
    if (*p == '"' || *p == '\\') {
      sb_add(b, "\\", 1);
      sb_add(b, p++, 1);
    } else if (*p >= 0x20 && *p < 0x7f)
      sb_add(b, p++, 1);
    else if (*p >= 0x80 && (n = utf8_len(p)) > 0) {
      sb_add(b, p, n);
      p += n;
    } else
      sb_fmt(b, "\\u%04x", *p++);
  }
  sb_add(b, "\"", 1);
}

/* One JSON entry per request: a flat sequence of fields, longer than most
 * functions but read top to bottom like the entry it writes. */
void fault_log_entry(lr_faults *f, conn *c) {
  const lr_http_req *r = &c->req;
  const char *body = c->in + r->head_len;
  sbuf b = { 0 };
  int first = 1;
  sb_fmt(&b, "{\"n\":%lld,\"conn\":%lld,\"method\":", f->total, c->serial);
  sb_json(&b, r->method);
  sb_str(&b, ",\"path\":");
  sb_json(&b, r->path);
  sb_str(&b, ",\"query\":");
  sb_json(&b, r->query);
  /* a body past LR_HTTP_MAX_BODY was hashed whole as it passed */
  sb_fmt(&b,
         ",\"time\":%.6f,\"body_len\":%zu,\"body_hash\":\"%016llx\","
         "\"headers\":{",
         c->head_time, r->body_len + r->dropped,
         r->dropped ? r->hash : lr_http_fnv1a(0xcbf29ce484222325ull, body, r->body_len));
  for (size_t i = 0; i < r->nheaders; i++) { /* one key per name */
    const char *name = r->headers[i].name;
    size_t j, k;
    for (j = 0; j < i && strcmp(r->headers[j].name, name) != 0; j++) {
    }
    if (j < i) continue;
    if (!first) sb_add(&b, ",", 1);
    first = 0;
    sb_json(&b, name);
    sb_add(&b, ":", 1);
    if (b.oom) break;
    /* join repeats as req.headers does: render, then splice the values */
    {
      sbuf v = { 0 };
      for (k = i; k < r->nheaders; k++)
        if (strcmp(r->headers[k].name, name) == 0) {
          if (v.len > 0) sb_str(&v, ", ");
          sb_str(&v, r->headers[k].value);
        }
      sb_add(&v, "", 1);
      if (!v.oom) sb_json(&b, v.p);
      sb_free(&v);
    }
  }
  sb_str(&b, "}}");
  sb_add(&b, "", 1);
  if (b.oom) {
    sb_free(&b);
    return;
  } /* the log is best effort */
  if (f->log == NULL && (f->log = calloc(LOG_MAX, sizeof *f->log)) == NULL) {
    sb_free(&b);
    return;
  }
  /* the oldest go first: at most LOG_MAX entries and LOG_MAX_BYTES bytes
     (the newest is always kept) */
  while (f->log_count > 0 && (f->log_count == LOG_MAX || f->log_bytes + b.len > LOG_MAX_BYTES)) {
    f->log_bytes -= strlen(f->log[f->log_first]) + 1;
    free(f->log[f->log_first]);
    f->log_first = (f->log_first + 1) % LOG_MAX;
    f->log_count--;
  }
  f->log[(f->log_first + f->log_count++) % LOG_MAX] = b.p;
  f->log_bytes += b.len;
}

void fault_log_clear(lr_faults *f) {
  for (size_t i = 0; i < f->log_count; i++) free(f->log[(f->log_first + i) % LOG_MAX]);
  f->log_first = f->log_count = 0;
  f->log_bytes = 0;
}
