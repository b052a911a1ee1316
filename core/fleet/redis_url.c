/* redis_url.c: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] and
 * unix://[[USER]:PASSWORD@]/PATH[?db=N], read the way redis-cli reads them
 * (userinfo without a colon is a password alone, as in `AUTH password`),
 * and redis-sentinel://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]]...[/DB]#MASTER
 * as Lettuce reads it (PORT 26379 by default; the credentials are the
 * master's: sentinels are asked without AUTH).
 * The one place that sees credentials in text form; everything else shows
 * u->redacted. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "fleet_internal.h"

#define DB_MAX 1000000

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = (char)tolower((unsigned char)c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* Percent-decodes src[0..n) into dst; -1 when too long or malformed (a
 * %00 too: a NUL cannot be sent in AUTH by this code). */
static int decode(const char *src, size_t n, char *dst, size_t size) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    char ch = src[i];
    if (ch == '%') {
      if (i + 2 >= n) return -1;
      int hi = hex_value(src[i + 1]), lo = hex_value(src[i + 2]);
      if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) return -1;
      ch = (char)(hi * 16 + lo);
      i += 2;
    }
    if (o + 1 >= size) return -1;
    dst[o++] = ch;
  }
  dst[o] = '\0';
  return 0;
}

static int parse_number(const char *s, size_t n, long lo, long hi, int *out) {
  if (n == 0 || n > 9) return -1;
  long v = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isdigit((unsigned char)s[i])) return -1;
    v = v * 10 + (s[i] - '0');
  }
  if (v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

/* userinfo = [USER:]PASSWORD, already cut at '@'. */
static lr_fleet_code parse_userinfo(const char *s, size_t n, lr_redis_url *u, char *err,
                                    size_t errlen) {
  const char *colon = memchr(s, ':', n);
  int bad = 0;
  if (colon) {
    bad |= decode(s, (size_t)(colon - s), u->user, sizeof u->user);
    n -= (size_t)(colon - s) + 1;
    s = colon + 1;
  }
  bad |= decode(s, n, u->password, sizeof u->password);
  if (bad) {
    lr_fmt(err, errlen,
           "redis URL: malformed or too long user or password "
           "(percent-encode '@', ':' and '/')");
    return LR_FLEET_E_ARG;
  }
  return LR_FLEET_OK;
}

/* HOST[:PORT][/DB] */
static lr_fleet_code parse_tcp(const char *s, lr_redis_url *u, char *err, size_t errlen) {
  const char *end_host, *rest;
  if (*s == '[') {
    end_host = strchr(s, ']');
    if (!end_host) goto bad;
    s++;
    rest = end_host + 1;
  } else {
    end_host = s + strcspn(s, ":/?");
    rest = end_host;
  }
  size_t hn = (size_t)(end_host - s);
  if (hn == 0 || hn >= sizeof u->host) goto bad;
  memcpy(u->host, s, hn);
  u->host[hn] = '\0';
  /* a name is letters, digits, '.', '-' and '_': anything else (a '#frag',
   * a space) was only found out by the name lookup, as a host not found */
  for (size_t i = 0; end_host[0] != ']' && i < hn; i++) {
    unsigned char c = (unsigned char)u->host[i];
    if (isalnum(c) || c == '.' || c == '-' || c == '_') continue;
    char what[24];
    lr_fmt(what, sizeof what, c > 0x20 && c < 0x7f ? "'%c'" : "the byte 0x%02x", c);
    lr_fmt(err, errlen, "redis URL: the host \"%.60s\" holds %s, which no host name holds%s",
           u->host, what, c == '#' ? " (only redis-sentinel:// takes a #MASTER)" : "");
    return LR_FLEET_E_ARG;
  }
  u->port = 6379;
  if (*rest == ':') {
    size_t pn = strcspn(rest + 1, "/?");
    if (parse_number(rest + 1, pn, 1, 65535, &u->port) != 0) goto bad;
    rest += 1 + pn;
  }
  if (*rest == '/' && rest[1] != '\0') {
    if (parse_number(rest + 1, strlen(rest + 1), 0, DB_MAX, &u->db) != 0) goto bad;
  } else if (*rest != '\0' && strcmp(rest, "/") != 0) {
    goto bad;
  }
  return LR_FLEET_OK;
bad:
  lr_fmt(err, errlen,
         "redis URL: expected redis://[[USER]:PASSWORD@]HOST"
         "[:PORT][/DB] with PORT 1-65535 and DB a number");
  return LR_FLEET_E_ARG;
}

/* /PATH[?db=N] */
static lr_fleet_code parse_unix(const char *s, lr_redis_url *u, char *err, size_t errlen) {
  size_t pn = strcspn(s, "?");
  if (*s != '/' || pn >= sizeof u->path) goto bad;
  memcpy(u->path, s, pn);
  u->path[pn] = '\0';
  if (s[pn] == '?') {
    if (strncmp(s + pn, "?db=", 4) != 0) goto bad;
    if (parse_number(s + pn + 4, strlen(s + pn + 4), 0, DB_MAX, &u->db) != 0) goto bad;
  }
  u->is_unix = 1;
  return LR_FLEET_OK;
bad:
  lr_fmt(err, errlen,
         "redis URL: expected unix://[[USER]:PASSWORD@]/PATH"
         "[?db=N] with an absolute PATH of at most %zu bytes",
         sizeof u->path - 1);
  return LR_FLEET_E_ARG;
}

#define SENTINEL_FORM                                                                        \
  "redis URL: expected redis-sentinel://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]]...[/DB]" \
  "#MASTER"

/* HOST[:PORT][,HOST[:PORT]]...[/DB]#MASTER */
static lr_fleet_code parse_sentinel(const char *s, lr_redis_url *u, char *err, size_t errlen) {
  const char *hash = strchr(s, '#');
  if (!hash || hash[1] == '\0') {
    lr_fmt(err, errlen, "%s: the master's name (#MASTER) is missing", SENTINEL_FORM);
    return LR_FLEET_E_ARG;
  }
  if (decode(hash + 1, strlen(hash + 1), u->master, sizeof u->master) != 0) {
    lr_fmt(err, errlen, "%s: the master's name is malformed or too long", SENTINEL_FORM);
    return LR_FLEET_E_ARG;
  }
  for (const char *c = u->master; *c; c++)
    if ((unsigned char)*c < 0x21 || *c == 0x7f) {
      lr_fmt(err, errlen, "%s: the master's name has a space or control byte", SENTINEL_FORM);
      return LR_FLEET_E_ARG;
    }
  size_t hosts = strcspn(s, "/#");
  for (const char *h = s; h < s + hosts;) {
    size_t n = strcspn(h, ",/#");
    char one[300];
    lr_redis_url t;
    memset(&t, 0, sizeof t);
    if (u->sentinels == LR_SENTINEL_MAX) {
      lr_fmt(err, errlen, "redis URL: more than %d sentinels", LR_SENTINEL_MAX);
      return LR_FLEET_E_ARG;
    }
    if (n == 0 || n >= sizeof one) goto bad;
    memcpy(one, h, n);
    one[n] = '\0';
    const char *after_host = one[0] == '[' ? strchr(one, ']') : one;
    if (after_host && !strchr(after_host, ':')) {
      /* no port: the sentinels' own */
      if (n + 7 > sizeof one) goto bad;
      strcat(one, ":26379");
    }
    if (parse_tcp(one, &t, err, errlen) != LR_FLEET_OK) goto bad;
    memcpy(u->sentinel_host[u->sentinels], t.host, sizeof t.host);
    u->sentinel_port[u->sentinels++] = t.port;
    h += n;
    if (*h == ',') h++;
  }
  if (u->sentinels == 0) goto bad;
  if (s[hosts] == '/' && s + hosts + 1 != hash &&
      parse_number(s + hosts + 1, (size_t)(hash - s - hosts - 1), 0, DB_MAX, &u->db) != 0)
    goto bad;
  return LR_FLEET_OK;
bad:
  lr_fmt(err, errlen, "%s, with PORT 1-65535 and DB a number", SENTINEL_FORM);
  return LR_FLEET_E_ARG;
}

static void redact(lr_redis_url *u) {
  const char *who = u->password[0] || u->user[0] ? "***@" : "";
  if (u->sentinels) {
    char *o = u->redacted, *end = u->redacted + sizeof u->redacted;
    lr_fmt(o, (size_t)(end - o), "redis-sentinel://%s", who);
    for (int i = 0; i < u->sentinels; i++) {
      o += strlen(o);
      lr_fmt(o, (size_t)(end - o), strchr(u->sentinel_host[i], ':') ? "%s[%s]:%d" : "%s%s:%d",
             i ? "," : "", u->sentinel_host[i], u->sentinel_port[i]);
    }
    o += strlen(o);
    lr_fmt(o, (size_t)(end - o), "/%d#%s", u->db, u->master);
  } else if (u->is_unix)
    lr_fmt(u->redacted, sizeof u->redacted, "unix://%s%s?db=%d", who, u->path, u->db);
  else
    lr_fmt(u->redacted, sizeof u->redacted,
           strchr(u->host, ':') ? "redis://%s[%s]:%d/%d" : "redis://%s%s:%d/%d", who, u->host,
           u->port, u->db);
}

lr_fleet_code lr_redis_url_parse(const char *url, lr_redis_url *u, char *err, size_t errlen) {
  memset(u, 0, sizeof *u);
  if (!url) url = "";
  int is_unix = 0, sentinel = 0;
  const char *s;
  if (strncmp(url, "redis://", 8) == 0)
    s = url + 8;
  else if (strncmp(url, "redis-sentinel://", 17) == 0)
    s = url + 17, sentinel = 1;
  else if (strncmp(url, "unix://", 7) == 0)
    s = url + 7, is_unix = 1;
  else if (strncmp(url, "redis+unix://", 13) == 0)
    s = url + 13, is_unix = 1;
  else {
    lr_fmt(err, errlen,
           strncmp(url, "rediss://", 9) == 0
             ? "redis URL: TLS (rediss://) needs a hiredis built with TLS support, which "
               "Debian 12's hiredis 0.14 lacks; use redis:// (on a trusted network or an "
               "SSH or stunnel tunnel) or unix://"
             : "redis URL: expected redis://HOST:PORT/DB, "
               "redis-sentinel://HOST:PORT[,HOST:PORT]...[/DB]#MASTER or unix:///PATH");
    return LR_FLEET_E_ARG;
  }
  /* userinfo ends at the last '@' before the path (TCP) or before '/' (Unix) */
  const char *auth_end = is_unix ? s + strcspn(s, "/") : s + strcspn(s, sentinel ? "/#" : "/?");
  const char *at = NULL;
  for (const char *p = s; p < auth_end; p++)
    if (*p == '@') at = p;
  if (at) {
    lr_fleet_code rc = parse_userinfo(s, (size_t)(at - s), u, err, errlen);
    if (rc != LR_FLEET_OK) return rc;
    s = at + 1;
  }
  lr_fleet_code rc = sentinel  ? parse_sentinel(s, u, err, errlen)
                     : is_unix ? parse_unix(s, u, err, errlen)
                               : parse_tcp(s, u, err, errlen);
  if (rc != LR_FLEET_OK && strchr(auth_end, '@')) {
    /* an '@' past where the userinfo ends: most likely a password with a
     * '/' or '?' in it, which the form alone would not tell */
    size_t n = strlen(err);
    lr_fmt(err + n, errlen - n,
           "; a '/', '?' or '#' in a user or password must be percent-encoded "
           "(%%2F, %%3F, %%23)");
  }
  if (rc != LR_FLEET_OK) return rc;
  redact(u);
  return LR_FLEET_OK;
}

static void scrub_one(char *msg, const char *secret) {
  size_t n = strlen(secret);
  if (n < 3) return; /* shorter ones would blot out ordinary words */
  for (char *p = strstr(msg, secret); p; p = strstr(p + 3, secret)) {
    memcpy(p, "***", 3);
    memmove(p + 3, p + n, strlen(p + n) + 1);
  }
}

void lr_redis_url_scrub(const lr_redis_url *u, char *msg) {
  if (!msg) return;
  scrub_one(msg, u->password);
  scrub_one(msg, u->user);
}

lr_fleet_code lr_fleet_url_check(const char *url, char *redacted, size_t size, char *err,
                                 size_t errlen) {
  lr_redis_url u;
  lr_fleet_code rc = lr_redis_url_parse(url, &u, err, errlen);
  if (rc == LR_FLEET_OK) lr_fmt(redacted, size, "%s", u.redacted);
  return rc;
}
