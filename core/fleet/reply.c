/* reply.c: Redis replies read with hard limits, and a server's text made
 * fit to show.
 *
 * hiredis 0.14's reader bounds nothing: a line that never ends, or a bulk
 * string announced as a gigabyte, is buffered until it is whole; an array
 * of two billion elements is allocated as announced; a count above
 * INT_MAX becomes a negative int and the next element is written through
 * a NULL pointer.  (hiredis 1.x has maxelements; 0.14, Debian's, does
 * not.)  So the reader here builds its objects through hiredis's own
 * functions behind checks of ours: each array at most LR_REPLY_MAX_ELEMENTS
 * elements, nesting at most LR_REPLY_MAX_DEPTH, each reply at most
 * LR_REPLY_MAX_OBJECTS objects and LR_REPLY_MAX_BYTES of strings, and at
 * most LR_REPLY_MAX_BYTES unparsed bytes waiting.  Anything beyond is a
 * protocol error: the connection is dropped and the local guards decide. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis.h>

#include "fleet_internal.h"

typedef struct {
  size_t objects, bytes; /* in the reply being read */
  char why[96];          /* the limit that refused it */
} budget;

static redisReplyObjectFunctions plain, bounded;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* hiredis 1.x counts elements in a size_t, 0.14 in an int. */
#if defined(HIREDIS_MAJOR) && HIREDIS_MAJOR >= 1
typedef size_t count_t;
#else
typedef int count_t;
#endif

static int depth_of(const redisReadTask *t) {
  int d = 0;
  for (; t && t->parent; t = t->parent) d++;
  return d;
}

/* 1 when one more object (of `bytes` string bytes) fits. */
static int admit(const redisReadTask *t, size_t bytes) {
  budget *b = t->privdata;
  if (!b) return 0;
  if (depth_of(t) > LR_REPLY_MAX_DEPTH) {
    lr_fmt(b->why, sizeof b->why, "nested deeper than %d", LR_REPLY_MAX_DEPTH);
    return 0;
  }
  if (++b->objects > LR_REPLY_MAX_OBJECTS) {
    lr_fmt(b->why, sizeof b->why, "more than %d values in one reply", LR_REPLY_MAX_OBJECTS);
    return 0;
  }
  if (bytes > LR_REPLY_MAX_BYTES - b->bytes) {
    lr_fmt(b->why, sizeof b->why, "more than %d bytes in one reply", LR_REPLY_MAX_BYTES);
    return 0;
  }
  b->bytes += bytes;
  return 1;
}

static void *make_string(const redisReadTask *t, char *s, size_t len) {
  return admit(t, len) ? plain.createString(t, s, len) : NULL;
}

static void *make_array(const redisReadTask *t, count_t n) {
  if ((long long)n < 0 || (long long)n > LR_REPLY_MAX_ELEMENTS) {
    budget *b = t->privdata;
    if (b)
      lr_fmt(b->why, sizeof b->why, "an array of %lld elements (at most %d)", (long long)n,
             LR_REPLY_MAX_ELEMENTS);
    return NULL;
  }
  return admit(t, 0) ? plain.createArray(t, n) : NULL;
}

static void *make_integer(const redisReadTask *t, long long v) {
  return admit(t, 0) ? plain.createInteger(t, v) : NULL;
}

static void *make_nil(const redisReadTask *t) { return admit(t, 0) ? plain.createNil(t) : NULL; }

/* hiredis's own functions, taken from a reader it made: they are static
 * in hiredis.c. */
static void learn_plain(void) {
  redisReader *r = redisReaderCreate();
  if (!r) return;
  plain = *r->fn;
  redisReaderFree(r);
  bounded = plain;
  bounded.createString = make_string;
  bounded.createArray = make_array;
  bounded.createInteger = make_integer;
  bounded.createNil = make_nil;
}

struct redisReader *lr_reply_reader_new(void) {
  pthread_once(&once, learn_plain);
  if (!plain.createString || !plain.createArray || !plain.createInteger || !plain.createNil)
    return NULL;
  budget *b = calloc(1, sizeof *b);
  redisReader *r = b ? redisReaderCreateWithFunctions(&bounded) : NULL;
  if (!r) {
    free(b);
    return NULL;
  }
  r->privdata = b;
#if defined(HIREDIS_MAJOR) && HIREDIS_MAJOR >= 1
  r->maxelements = LR_REPLY_MAX_ELEMENTS; /* hiredis 1.x's own limit, the same */
#endif
  return r;
}

void lr_reply_reader_free(struct redisReader *r) {
  if (!r) return;
  free(r->privdata);
  r->privdata = NULL;
  redisReaderFree(r);
}

lr_fleet_code lr_reply_feed(struct redisReader *r, const char *buf, size_t n, char *err,
                            size_t errlen) {
  /* what waits unparsed: a line or bulk string still incomplete */
  if (r->len - r->pos > LR_REPLY_MAX_BYTES || n > LR_REPLY_MAX_BYTES - (r->len - r->pos)) {
    lr_fmt(err, errlen, "reading a reply: more than %d bytes of it in flight", LR_REPLY_MAX_BYTES);
    return LR_FLEET_E_PROTOCOL;
  }
  if (redisReaderFeed(r, buf, n) != REDIS_OK) {
    lr_fmt(err, errlen, "reading a reply: out of memory");
    return LR_FLEET_E_NOMEM;
  }
  return LR_FLEET_OK;
}

lr_fleet_code lr_reply_next(struct redisReader *r, struct redisReply **out, char *err,
                            size_t errlen) {
  *out = NULL;
  budget *b = r->privdata;
  void *reply = NULL;
  if (redisReaderGetReply(r, &reply) != REDIS_OK) {
    char why[160];
    lr_fmt(why, sizeof why, "%s", b && b->why[0] ? b->why : r->errstr);
    lr_reply_escape(why, strlen(why), err, errlen, "reading a reply: ");
    return LR_FLEET_E_PROTOCOL;
  }
  if (reply && b) b->objects = b->bytes = 0, b->why[0] = '\0'; /* the next one starts */
  *out = reply;
  return LR_FLEET_OK;
}

/* ---- a server's text, fit to show */

const char *lr_reply_kind(const redisReply *r) {
  switch (r ? r->type : 0) {
  case REDIS_REPLY_STRING: return "a string";
  case REDIS_REPLY_ARRAY: return "an array";
  case REDIS_REPLY_INTEGER: return "an integer";
  case REDIS_REPLY_NIL: return "a nil";
  case REDIS_REPLY_STATUS: return "a status";
  case REDIS_REPLY_ERROR: return "an error";
  default: return "an unknown kind of reply";
  }
}

void lr_reply_escape(const char *s, size_t n, char *out, size_t size, const char *prefix) {
  if (!size) return;
  size_t o = 0;
  lr_fmt(out, size, "%s", prefix ? prefix : "");
  o = strlen(out);
  for (size_t i = 0; i < n && o + 1 < size; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch >= 0x20 && ch != 0x7f && ch != '\\') {
      out[o++] = (char)ch;
      continue;
    }
    if (o + 5 >= size) break; /* never half an escape */
    if (ch == '\\')
      out[o++] = '\\', out[o++] = '\\';
    else {
      static const char hex[] = "0123456789abcdef";
      out[o++] = '\\', out[o++] = 'x', out[o++] = hex[ch >> 4], out[o++] = hex[ch & 15];
    }
  }
  out[o] = '\0';
}

/* The reply's text, each occurrence of the URL's user or password
 * replaced before anything is cut (a cut could leave part of one). */
void lr_reply_quote(const lr_redis_url *u, const struct redisReply *r, char *out, size_t size) {
  lr_reply_quote_text(u, r && r->str ? r->str : "", r && r->str ? r->len : 0, out, size);
}

void lr_reply_quote_text(const lr_redis_url *u, const char *s, size_t n, char *out, size_t size) {
  if (n > LR_REPLY_MAX_BYTES) n = LR_REPLY_MAX_BYTES;
  char *copy = malloc(n + 1);
  if (!copy) {
    lr_fmt(out, size, "(the server's text: out of memory)");
    return;
  }
  memcpy(copy, s, n);
  copy[n] = '\0';
  for (size_t i = 0; i < n; i++) /* a NUL inside must not hide what follows */
    if (!copy[i]) copy[i] = ' ';
  /* a password too short to scrub without blotting out words: only the
   * error's code word is shown, and not even that if it holds one.  A
   * user name is no secret: a short one (an ACL user "lr") hid every
   * reply's words, the ones that said what the user lacks among them */
  if (u->password[0] && strlen(u->password) < 3) {
    size_t w = strcspn(copy, " ");
    for (size_t i = 0; i < w; i++)
      if (copy[i] < 'A' || copy[i] > 'Z') w = 0;
    copy[w] = '\0';
    if (strstr(copy, u->password)) copy[0] = '\0';
  }
  lr_redis_url_scrub(u, copy);
  lr_reply_escape(copy, strlen(copy), out, size < 201 ? size : 201, "");
  free(copy);
}
