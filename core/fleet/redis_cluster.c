/* redis_cluster.c: a Redis Cluster reached through any of its nodes.  The
 * fleet's keys share one hash tag (luaretry:{KEY}, luaretry:{KEY}:procs,
 * luaretry:{KEY}:rate), so one node owns all of them; a node that does not
 * answers MOVED (the slot lives elsewhere: remembered for every later
 * connect) or ASK (the slot is being migrated and the keys are already
 * on the target: that node, each command after an ASKING, for as long as
 * the connection lasts: once the migration ends ASKING is harmless, and
 * if the slot moves on, the node's MOVED is followed).  A redirect is believed only
 * when it names the keys' own slot, and followed at most
 * LR_CLUSTER_REDIRECTS times in one round trip (a MOVED loop, a node that
 * answers MOVED back): then the round trip fails as any refusal does and
 * the local guards decide, said once.  CLUSTERDOWN, TRYAGAIN and LOADING
 * are refusals too.  hiredis 0.14 knows nothing of clusters. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis.h>

#include "fleet_internal.h"

/* CRC16-XMODEM (polynomial 0x1021, no reflection, initial 0), as the
 * Redis Cluster specification defines the key's hash. */
static unsigned crc16(const char *s, size_t n) {
  unsigned crc = 0;
  for (size_t i = 0; i < n; i++) {
    crc ^= (unsigned)(unsigned char)s[i] << 8;
    for (int b = 0; b < 8; b++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
    crc &= 0xffff;
  }
  return crc;
}

int lr_cluster_slot(const char *key, size_t n) {
  const char *open = memchr(key, '{', n);
  if (open) {
    size_t from = (size_t)(open - key) + 1;
    const char *close = memchr(open + 1, '}', n - from);
    if (close && close > open + 1)
      return (int)(crc16(open + 1, (size_t)(close - open - 1)) % 16384);
  }
  return (int)(crc16(key, n) % 16384);
}

/* "MOVED 3999 127.0.0.1:6381": 1 and the slot, host and port; the host
 * may be empty ("MOVED 3999 :6381", Redis 7's unknown-endpoint): the one
 * the command went to. */
static int parse(const char *s, size_t n, const char *word, int *slot, char *host, size_t hsize,
                 int *port) {
  size_t w = strlen(word);
  if (n <= w || strncmp(s, word, w) != 0) return 0;
  char buf[300];
  if (n >= sizeof buf) return 0;
  memcpy(buf, s, n);
  buf[n] = '\0';
  char *p = buf + w, *end;
  long v = strtol(p, &end, 10);
  if (end == p || *end != ' ' || v < 0 || v > 16383) return 0;
  *slot = (int)v;
  p = end + 1;
  char *colon = strrchr(p, ':');
  if (!colon || (size_t)(colon - p) >= hsize) return 0;
  long pv = strtol(colon + 1, &end, 10);
  if (end == colon + 1 || *end != '\0' || pv < 1 || pv > 65535) return 0;
  for (char *c = p; c < colon; c++)
    if (!isgraph((unsigned char)*c)) return 0;
  memcpy(host, p, (size_t)(colon - p));
  host[colon - p] = '\0';
  *port = (int)pv;
  return 1;
}

/* The host this connection reached for a redirect that names none: an
 * ASK's node, a MOVED's, or "" for the URL's own (lr_redis_open). */
static void same_host(const lr_redis_conn *c, char *host, size_t size) {
  if (host[0]) return;
  lr_fmt(host, size, "%s", c->ask_port ? c->ask_host : c->moved_port ? c->moved_host : "");
}

void lr_cluster_note(lr_redis_conn *c, const redisReply *r) {
  if (!r || r->type != REDIS_REPLY_ERROR || !r->str || c->slot < 0) return;
  char host[256];
  int slot = -1, port = 0;
  if (parse(r->str, (size_t)r->len, "MOVED ", &slot, host, sizeof host, &port) && slot == c->slot) {
    same_host(c, host, sizeof host);
    memcpy(c->moved_host, host, sizeof host);
    c->moved_port = port;
    c->redirected = 1;
  } else if (parse(r->str, (size_t)r->len, "ASK ", &slot, host, sizeof host, &port) &&
             slot == c->slot) {
    same_host(c, host, sizeof host);
    memcpy(c->ask_host, host, sizeof host);
    c->ask_port = port;
    c->redirected = 1;
  }
}

int lr_cluster_again(lr_redis_conn *c, int *redirects) {
  if (!c->redirected) return 0;
  c->redirected = 0;
  if (++*redirects <= LR_CLUSTER_REDIRECTS) return 1;
  c->ask_port = 0;
  return 0;
}

void lr_cluster_done(lr_redis_conn *c) {
  c->redirected = 0;
  c->ask_port = 0;
}
