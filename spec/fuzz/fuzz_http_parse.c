/* fuzz_http_parse.c: the fault server's request parser (lr_http_parse) on
 * arbitrary bytes, fed as the server feeds it: pieces appended to one
 * buffer, each parsed request cut off the front (pipelining), a refused
 * one ending the connection.  The bytes not yet "received" are poisoned,
 * so ASan catches a read past *len.  Each input is parsed twice, whole
 * and in pieces of a few bytes, and both must see the same requests.
 * Invariants on each request: its strings lie in its head, the body in
 * the buffer, the framing as its headers say. */
#include <sanitizer/asan_interface.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "faults/faults.h"

#define MAX_SEEN 64 /* requests compared per input */

typedef struct {
  int status;
  size_t nheaders, body_len;
  uint64_t digest; /* of method, path, query, headers and body */
} seen;

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

static void check_in_head(const char *s, const char *buf, const lr_http_req *r) {
  if (!s || s < buf || s >= buf + r->head_len) abort();
  if (!memchr(s, '\0', (size_t)(buf + r->head_len - s))) abort();
}

/* A finished request: where everything lies, and its digest. */
static uint64_t check_done(const lr_http_req *r, const char *buf, size_t len) {
  if (r->head_len == 0 || r->end < r->head_len || r->end > len) abort();
  if (r->head_len + r->body_len > r->end || r->nheaders > LR_HTTP_MAX_HEADERS) abort();
  if (!r->chunked && r->body_len != r->content_length) abort();
  if (r->body_len > LR_HTTP_MAX_BODY || !lr_http_body_done(r)) abort();
  check_in_head(r->method, buf, r);
  if (strcmp(r->path, "/") != 0) check_in_head(r->path, buf, r); /* else maybe a literal */
  if (*r->query) check_in_head(r->query, buf, r);
  uint64_t h = 0xcbf29ce484222325ULL;
  h = fnv(h, r->method, strlen(r->method) + 1);
  h = fnv(h, r->path, strlen(r->path) + 1);
  h = fnv(h, r->query, strlen(r->query) + 1);
  for (size_t i = 0; i < r->nheaders; i++) {
    const char *n = r->headers[i].name, *v = r->headers[i].value;
    check_in_head(n, buf, r);
    check_in_head(v, buf, r);
    for (const char *c = n; *c; c++)
      if (*c >= 'A' && *c <= 'Z') abort();
    h = fnv(h, n, strlen(n) + 1);
    h = fnv(h, v, strlen(v) + 1);
  }
  return fnv(h, buf + r->head_len, r->body_len);
}

/* Parses data in pieces of `step` bytes (0: all at once) into out[];
 * returns how many requests ended (done or refused). */
static size_t parse_all(const uint8_t *data, size_t size, size_t step, seen *out) {
  char *buf = malloc(size ? size : 1);
  if (!buf) abort();
  lr_http_req *r = calloc(1, sizeof *r);
  if (!r) abort();
  size_t fed = 0, len = 0, n = 0;
  ASAN_POISON_MEMORY_REGION(buf, size);
  while (n < MAX_SEEN) {
    size_t piece = step ? (size - fed < step ? size - fed : step) : size - fed;
    ASAN_UNPOISON_MEMORY_REGION(buf + len, piece);
    memcpy(buf + len, data + fed, piece);
    fed += piece;
    len += piece;
    size_t before = len;
    int st = lr_http_parse(r, buf, &len);
    if (len > before) abort();
    ASAN_POISON_MEMORY_REGION(buf + len, before - len); /* decoded away */
    if (st == LR_HTTP_MORE) {
      if (fed == size) break;
      continue;
    }
    seen *s = &out[n++];
    memset(s, 0, sizeof *s);
    s->status = st;
    if (st != LR_HTTP_DONE) break; /* the server answers and closes */
    s->nheaders = r->nheaders;
    s->body_len = r->body_len;
    s->digest = check_done(r, buf, len);
    /* the next request starts at r->end, as the server's answer() does */
    memmove(buf, buf + r->end, len - r->end);
    ASAN_POISON_MEMORY_REGION(buf + len - r->end, r->end);
    len -= r->end;
    memset(r, 0, sizeof *r);
  }
  ASAN_UNPOISON_MEMORY_REGION(buf, size);
  free(r);
  free(buf);
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static seen whole[MAX_SEEN], pieces[MAX_SEEN];
  size_t step = 1 + (size_t)(fnv(0xcbf29ce484222325ULL, data, size) % 7);
  size_t a = parse_all(data, size, 0, whole);
  size_t b = parse_all(data, size, step, pieces);
  /* Pieces may stop early only where the whole stops too: compare what
   * both saw. */
  size_t n = a < b ? a : b;
  for (size_t i = 0; i < n; i++)
    if (memcmp(&whole[i], &pieces[i], sizeof whole[i]) != 0) abort();
  if (a != b) abort();
  return 0;
}
