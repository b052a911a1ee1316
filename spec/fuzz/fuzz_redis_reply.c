/* fuzz_redis_reply.c: what a Redis server (or anything on its port) sends
 * the fleet, read by the fleet's bounded reader (lr_reply_reader_new) and
 * decoded as each of the fleet's questions would decode it: the update
 * script's answer (lr_redis_script_decode), the status (TIME, HMGET, ZREVRANGE:
 * lr_fleet_status_decode) and an error's text (lr_reply_quote).
 *
 * The first byte picks the piece size (1 to 16 bytes) the rest is fed in,
 * as recv() would cut it.  Invariants: the reader stops with a protocol
 * error or returns whole replies, never more than LR_REPLY_MAX_ELEMENTS
 * elements in an array nor more than LR_REPLY_MAX_DEPTH levels; a decoded
 * script answer is within what the script can answer; a status's members
 * hold no control byte; a quoted text never holds the password. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis.h>

#include "fleet_internal.h"

#define PASSWORD "s3cret-Pa55"

static void check_shape(const redisReply *r, int depth) {
  if (depth > LR_REPLY_MAX_DEPTH) abort();
  if (r->type != REDIS_REPLY_ARRAY) return;
  if (r->elements > LR_REPLY_MAX_ELEMENTS) abort();
  for (size_t i = 0; i < r->elements; i++) {
    if (!r->element[i]) abort();
    check_shape(r->element[i], depth + 1);
  }
}

static void check_script(const redisReply *r, const lr_redis_url *u) {
  lr_fleet_script s = { .sha = "", .use_eval = 0 };
  lr_fleet_limits l = { .max_milli = 10000,
                        .failures = 5,
                        .open_ms = 30000,
                        .probes = 1,
                        .ttl_ms = 3600000,
                        .ratio_milli = 100,
                        .budget = 1,
                        .breaker = 1 };
  lr_fleet_reply out;
  int noscript = 0;
  char err[300];
  if (lr_redis_script_decode(&s, u, r, &l, 1, 2000, 1, &out, &noscript, err, sizeof err) ==
      LR_FLEET_OK) {
    /* the reserve answers, as asked, exactly when the tokens refuse */
    if (out.reserve < 0 || out.reserve > 2 ||
        (out.reserve != 0) != ((out.tokens + out.leased) * 2 <= l.max_milli))
      abort();
    if (out.tokens < 0 || out.tokens > l.max_milli || out.state < 0 || out.state > 2) abort();
    /* a block within what was asked and within the blocks out */
    if (out.lease < 0 || out.lease > 2000 || out.lease > out.leased || out.leased > l.max_milli)
      abort();
    if (out.opened_at > out.now_ms || out.granted > 1 || out.granted < 0) abort();
    /* an open breaker within its open period; permits from a half-open one */
    if (out.state == 1 && out.now_ms - out.opened_at >= l.open_ms) abort();
    if (out.granted > 0 && out.state != 2) abort();
  }
  if (strstr(err, PASSWORD)) abort();
}

static void check_status(redisReply *three[3]) {
  lr_fleet_status st;
  memset(&st, 0, sizeof st);
  char err[300];
  if (lr_fleet_status_decode(three, &st, err, sizeof err) == LR_FLEET_OK) {
    for (size_t i = 0; i < st.count; i++) {
      for (const char *c = st.processes[i].member; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) abort();
      if (st.processes[i].seen_ago < 0 || st.processes[i].seen_ago > 60) abort();
    }
  }
  lr_fleet_status_free(&st);
}

static void check_quote(const redisReply *r, const lr_redis_url *u) {
  char text[204];
  lr_reply_quote(u, r, text, sizeof text);
  if (strlen(text) > 200 || strstr(text, PASSWORD)) abort();
  for (const char *c = text; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t piece = (size_t)(data[0] % 16) + 1;
  data++, size--;
  lr_redis_url u;
  char err[300];
  if (lr_redis_url_parse("redis://:" PASSWORD "@127.0.0.1:6379/0", &u, err, sizeof err) !=
      LR_FLEET_OK)
    abort();
  struct redisReader *rd = lr_reply_reader_new();
  if (!rd) return 0;
  redisReply *kept[3] = { NULL, NULL, NULL };
  int nkept = 0, broken = 0;
  for (size_t at = 0; at < size && !broken; at += piece) {
    size_t n = size - at < piece ? size - at : piece;
    if (lr_reply_feed(rd, (const char *)data + at, n, err, sizeof err) != LR_FLEET_OK) break;
    for (int k = 0; k < 64; k++) {
      redisReply *r = NULL;
      if (lr_reply_next(rd, &r, err, sizeof err) != LR_FLEET_OK) {
        broken = 1;
        break;
      }
      if (!r) break;
      check_shape(r, 0);
      check_script(r, &u);
      if (r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STATUS) check_quote(r, &u);
      if (nkept < 3)
        kept[nkept++] = r;
      else
        freeReplyObject(r);
    }
  }
  if (nkept == 3) check_status(kept);
  for (int i = 0; i < nkept; i++) freeReplyObject(kept[i]);
  lr_reply_reader_free(rd);
  return 0;
}
