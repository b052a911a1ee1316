/* digest.c: the digests a server states of what it sends, and the hashes
 * of what came, so that a download is verified before it is kept.  RFC
 * 9530's Repr-Digest (the whole representation) and Content-Digest (this
 * message's content: a 206's part), RFC 1864's Content-MD5 (the content),
 * Google's x-goog-hash (the whole object: crc32c and md5).  sha-256,
 * sha-512 and md5 through OpenSSL's libcrypto; crc32c (Castagnoli) here,
 * from a table. */
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http.h"

static const char *const ALG_NAMES[LR_ALGS] = { "crc32c", "md5", "sha-256", "sha-512" };
static const size_t ALG_LEN[LR_ALGS] = { 4, 16, 32, 64 };

const char *lr_alg_name(int alg) { return alg >= 0 && alg < LR_ALGS ? ALG_NAMES[alg] : "?"; }

/* ---- crc32c: the reflected Castagnoli polynomial, a byte at a time */

static uint32_t crc_table[256];

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    crc_table[i] = c;
  }
}

static uint32_t crc32c(uint32_t crc, const unsigned char *p, size_t n) {
  if (!crc_table[1]) crc_init(); /* idempotent: every thread writes the same */
  crc = ~crc;
  while (n--) crc = crc_table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

/* ---- hashes of what came */

static const EVP_MD *evp(int alg) {
  switch (alg) {
  case LR_MD5: return EVP_md5();
  case LR_SHA256: return EVP_sha256();
  case LR_SHA512: return EVP_sha512();
  }
  return NULL;
}

int lr_hash_start(lr_hash *h, unsigned algs) {
  lr_hash_free(h);
  h->algs = algs;
  for (int a = 0; a < LR_ALGS; a++) {
    if (!(algs & (1u << a)) || a == LR_CRC32C) continue;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    h->md[a] = ctx;
    if (!ctx || EVP_DigestInit_ex(ctx, evp(a), NULL) != 1) return -1;
  }
  return 0;
}

void lr_hash_add(lr_hash *h, const void *data, size_t len) {
  if (h->algs & (1u << LR_CRC32C)) h->crc = crc32c(h->crc, data, len);
  for (int a = 0; a < LR_ALGS; a++)
    if (h->md[a]) EVP_DigestUpdate(h->md[a], data, len);
}

size_t lr_hash_value(const lr_hash *h, int alg, unsigned char out[64]) {
  if (!(h->algs & (1u << alg))) return 0;
  if (alg == LR_CRC32C) {
    for (int i = 0; i < 4; i++) out[i] = (unsigned char)(h->crc >> (24 - 8 * i));
    return 4;
  }
  /* a copy is finished: the hash goes on if the body does */
  EVP_MD_CTX *copy = EVP_MD_CTX_new();
  unsigned n = 0;
  if (!copy || EVP_MD_CTX_copy_ex(copy, h->md[alg]) != 1 || EVP_DigestFinal_ex(copy, out, &n) != 1)
    n = 0;
  EVP_MD_CTX_free(copy);
  return n;
}

void lr_hash_free(lr_hash *h) {
  for (int a = 0; a < LR_ALGS; a++) EVP_MD_CTX_free(h->md[a]);
  memset(h, 0, sizeof *h);
}

/* ---- what the server says */

static int b64_value(int c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

/* Base64 of s[0..n) into out (at most cap bytes); its length, or -1. */
static long b64_decode(const char *s, size_t n, unsigned char *out, size_t cap) {
  while (n && s[n - 1] == '=') n--;
  size_t len = 0;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; i++) {
    int v = b64_value((unsigned char)s[i]);
    if (v < 0) return -1;
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (len == cap) return -1;
      out[len++] = (unsigned char)(acc >> bits);
    }
  }
  return (long)len;
}

static int alg_named(const char *s, size_t n) {
  for (int a = 0; a < LR_ALGS; a++)
    if (strlen(ALG_NAMES[a]) == n && strncasecmp(s, ALG_NAMES[a], n) == 0) return a;
  return -1;
}

/* One "alg=value" (value base64, or :base64: in RFC 9530's fields) into
 * *best when it is a stronger algorithm than best has. */
static void offer(const char *field, int alg, const char *v, size_t n, lr_digest_said *best) {
  unsigned char buf[64];
  if (n >= 2 && v[0] == ':' && v[n - 1] == ':') v++, n -= 2;
  long len = b64_decode(v, n, buf, sizeof buf);
  if (alg < 0 || len != (long)ALG_LEN[alg] || (best->field && alg <= best->alg)) return;
  best->field = field;
  best->alg = alg;
  best->len = (size_t)len;
  memcpy(best->value, buf, (size_t)len);
}

int lr_digest_read(const char *name, const char *value, lr_digest_said *whole,
                   lr_digest_said *part) {
  static const char *const FIELDS[] = { "repr-digest", "content-digest", "x-goog-hash",
                                        "content-md5" };
  int which = -1;
  for (int i = 0; i < 4; i++)
    if (strcmp(name, FIELDS[i]) == 0) which = i;
  if (which < 0 || !value) return 0;
  lr_digest_said *into = which == 1 || which == 3 ? part : whole;
  const char *before = into->field;
  if (which == 3) {
    size_t n = strlen(value);
    while (n && (value[n - 1] == ' ' || value[n - 1] == '\t')) n--;
    offer(FIELDS[3], LR_MD5, value, n, into);
    return into->field != before;
  }
  /* a list of key=value, by commas; a quoted value may hold a comma */
  for (const char *s = value; *s;) {
    while (*s == ' ' || *s == '\t' || *s == ',') s++;
    const char *key = s;
    while (*s && *s != '=' && *s != ',') s++;
    size_t keylen = (size_t)(s - key);
    if (*s != '=') continue;
    const char *v = ++s;
    int quoted = 0;
    while (*s && (quoted || *s != ',')) {
      if (*s == '"') quoted = !quoted;
      s++;
    }
    size_t n = (size_t)(s - v);
    const char *semi = memchr(v, ';', n); /* a parameter: not ours */
    if (semi) n = (size_t)(semi - v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
    int alg = alg_named(key, keylen);
    /* x-goog-hash says crc32c and md5 only; RFC 9530 sha-256 and sha-512
     * (md5 there is deprecated, crc32c not registered) */
    if (which == 2 ? alg == LR_CRC32C || alg == LR_MD5 : alg == LR_SHA256 || alg == LR_SHA512)
      offer(FIELDS[which], alg, v, n, into);
  }
  return into->field != before;
}

int lr_digest_hex(const char *spec, lr_digest_said *out) {
  const char *eq = strchr(spec, '=');
  if (!eq) return -1;
  int alg = alg_named(spec, (size_t)(eq - spec));
  if (alg < 0 || alg == LR_CRC32C) return -1;
  const char *hex = eq + 1;
  if (strlen(hex) != 2 * ALG_LEN[alg]) return -1;
  for (size_t i = 0; i < ALG_LEN[alg]; i++) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1 || !strchr("0123456789abcdefABCDEF", hex[2 * i]) ||
        !strchr("0123456789abcdefABCDEF", hex[2 * i + 1]))
      return -1;
    out->value[i] = (unsigned char)v;
  }
  out->field = "--checksum";
  out->alg = alg;
  out->len = ALG_LEN[alg];
  return 0;
}

void lr_digest_text(const unsigned char *v, size_t len, char *out, size_t cap) {
  size_t i = 0;
  for (; i < len && 2 * i + 2 < cap; i++) snprintf(out + 2 * i, 3, "%02x", v[i]);
  out[cap ? (2 * i < cap ? 2 * i : cap - 1) : 0] = '\0';
}

/* ---- the check of one answer */

/* The bytes the sink held before the call (-C -, an earlier run's), read
 * through the host into the whole hash, before this answer's are added;
 * without a reader the whole is not known. */
static int hash_held(lr_transfer *t) {
  lr_resume *rs = t->resume;
  if (rs->whole_ok || !rs->opt->held) return 0;
  unsigned algs = rs->expect.field ? 1u << rs->expect.alg : 0;
  if (!t->coded && t->said_whole.field) algs |= 1u << t->said_whole.alg;
  if (!algs) return 0;
  if (lr_hash_start(&rs->whole, algs) != 0) return -1;
  char buf[65536];
  for (uint64_t off = 0; off < rs->have;) {
    size_t want = rs->have - off < sizeof buf ? (size_t)(rs->have - off) : sizeof buf;
    size_t n = rs->opt->held(t->stream_ud, off, buf, want);
    if (n == 0 || n > want) {
      lr_hash_free(&rs->whole); /* unreadable: not known, not checked */
      return 0;
    }
    lr_hash_add(&rs->whole, buf, n);
    off += n;
  }
  rs->whole_ok = 1;
  return 0;
}

int lr_digest_begin(lr_transfer *t) {
  t->digest_ready = 1;
  const char *s = t->header_text.data, *end = s + t->header_text.len;
  while (s && s < end) {
    const char *value = s + strlen(s) + 1;
    lr_digest_read(s, value, &t->said_whole, &t->said_part);
    if (strcmp(s, "content-encoding") == 0 && strcasecmp(value, "identity") != 0) t->coded = 1;
    s = value + strlen(value) + 1;
  }
  lr_resume *rs = t->resume;
  int whole_answer = t->status_code == 200;
  unsigned algs = 0;
  if (!t->coded && t->said_part.field) algs |= 1u << t->said_part.alg;
  if (!t->coded && t->said_whole.field && whole_answer) algs |= 1u << t->said_whole.alg;
  if (t->call && t->call->expect.field && whole_answer) algs |= 1u << t->call->expect.alg;
  if (algs && lr_hash_start(&t->part, algs) != 0) return -1;
  if (rs && rs->initial && rs->have > 0) return hash_held(t);
  if (!rs || rs->have > 0) return 0; /* appended: the whole hash goes on */
  /* the sink starts from zero: so does the hash of all it will hold */
  algs = rs->expect.field ? 1u << rs->expect.alg : 0;
  if (!t->coded && t->said_whole.field) algs |= 1u << t->said_whole.alg;
  rs->whole_ok = !rs->initial;
  if (lr_hash_start(&rs->whole, algs) != 0) return -1;
  return 0;
}

/* 1 when what h hashed is not what `said` says (why in t->detail); 0 when
 * it is, or when h did not hash that algorithm. */
static int differs(lr_transfer *t, const lr_hash *h, const lr_digest_said *said, const char *what) {
  unsigned char got[64];
  size_t n = lr_hash_value(h, said->alg, got);
  if (n == 0 || (n == said->len && memcmp(got, said->value, n) == 0)) return 0;
  char a[40], b[40];
  lr_digest_text(got, n, a, sizeof a);
  lr_digest_text(said->value, said->len, b, sizeof b);
  snprintf(t->detail, sizeof t->detail, "the %s's %s is %s..., %s says %s...", what,
           lr_alg_name(said->alg), a, said->field, b);
  return 1;
}

const char *lr_digest_check(lr_transfer *t) {
  if (!t->digest_ready && lr_digest_begin(t) != 0) return NULL;
  lr_resume *rs = t->resume;
  int whole_answer = t->status_code == 200;
  /* the whole so far: this body for a 200, the sink's from zero for the
   * rest of a download we asked for (not a part the host's Range asked) */
  const lr_hash *whole = whole_answer                       ? &t->part
                         : rs && rs->whole_ok && rs->asking ? &rs->whole
                                                            : NULL;
  if (!t->coded) {
    if (t->said_part.field && differs(t, &t->part, &t->said_part, "body")) return "digest_mismatch";
    if (t->said_whole.field && whole && differs(t, whole, &t->said_whole, "download"))
      return "digest_mismatch";
  }
  /* the host's own, on a hedge's body too */
  lr_resume *call = t->call;
  if (call && call->expect.field && whole && differs(t, whole, &call->expect, "download"))
    return ++call->expect_misses > 1 ? "checksum_mismatch" : "digest_mismatch";
  return NULL;
}
