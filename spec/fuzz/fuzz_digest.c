/* fuzz_digest.c: the download path's readers of what a server says
 * (core/http): Content-Range (lr_content_range), the digest fields
 * (lr_digest_read: Repr-Digest, Content-Digest, Content-MD5, x-goog-hash)
 * and --checksum's ALG=HEX (lr_digest_hex), with the hashes they are
 * checked against (lr_hash_*) over the same bytes.  The first byte picks
 * the field; the rest is its value.  Invariants: a range read is FIRST <=
 * LAST < TOTAL (TOTAL 0: "*") and reads back the same when printed; a
 * digest taken has a known algorithm and exactly its length, lands in the
 * right slot (the whole's or the part's) and is read the same twice; a
 * checksum read prints back as its hex; a hash fed in two pieces equals
 * the hash fed at once, and crc32c of "123456789" is 0xE3069283. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"

static const char *const FIELDS[] = { "repr-digest", "content-digest", "x-goog-hash",
                                      "content-md5", "content-range",  "checksum" };
static const size_t LEN[LR_ALGS] = { 4, 16, 32, 64 };

static void check_said(const lr_digest_said *s) {
  if (!s->field) return;
  if (s->alg < 0 || s->alg >= LR_ALGS || s->len != LEN[s->alg]) abort();
}

static void check_range(const char *v) {
  uint64_t r[3], again[3];
  if (lr_content_range(v, r) != 0) return;
  if (r[1] < r[0] || (r[2] && r[1] >= r[2])) abort();
  char text[100];
  if (r[2])
    snprintf(text, sizeof text, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, r[0], r[1], r[2]);
  else
    snprintf(text, sizeof text, "bytes %" PRIu64 "-%" PRIu64 "/*", r[0], r[1]);
  if (lr_content_range(text, again) != 0 || memcmp(r, again, sizeof r) != 0) abort();
}

static void check_fields(int which, const char *v) {
  lr_digest_said whole, part, whole2, part2;
  memset(&whole, 0, sizeof whole);
  memset(&part, 0, sizeof part);
  memset(&whole2, 0, sizeof whole2);
  memset(&part2, 0, sizeof part2);
  int took = lr_digest_read(FIELDS[which], v, &whole, &part);
  if (took != 0 && took != 1) abort();
  check_said(&whole);
  check_said(&part);
  int to_part = which == 1 || which == 3;
  if ((to_part ? whole.field : part.field) != NULL) abort();
  if (took != ((to_part ? part.field : whole.field) != NULL)) abort();
  lr_digest_read(FIELDS[which], v, &whole2, &part2);
  if (memcmp(&whole, &whole2, sizeof whole) != 0 || memcmp(&part, &part2, sizeof part) != 0)
    abort();
}

static void check_hex(const char *v) {
  lr_digest_said s;
  memset(&s, 0, sizeof s);
  if (lr_digest_hex(v, &s) != 0) return;
  check_said(&s);
  char hex[200];
  lr_digest_text(s.value, s.len, hex, sizeof hex);
  const char *given = strchr(v, '=') + 1;
  if (strlen(hex) != 2 * s.len || strcasecmp(hex, given) != 0) abort();
}

static void check_hashes(const uint8_t *data, size_t size) {
  static int checked;
  lr_hash a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  unsigned all = (1u << LR_ALGS) - 1;
  if (lr_hash_start(&a, all) != 0 || lr_hash_start(&b, all) != 0) abort();
  if (!checked) {
    unsigned char v[64];
    lr_hash_add(&a, "123456789", 9);
    if (lr_hash_value(&a, LR_CRC32C, v) != 4 || v[0] != 0xE3 || v[1] != 0x06 || v[2] != 0x92 ||
        v[3] != 0x83)
      abort();
    checked = 1;
    lr_hash_start(&a, all);
  }
  size_t cut = size ? data[0] % (size + 1) : 0;
  lr_hash_add(&a, data, size);
  lr_hash_add(&b, data, cut);
  lr_hash_add(&b, data + cut, size - cut);
  for (int alg = 0; alg < LR_ALGS; alg++) {
    unsigned char x[64], y[64];
    size_t n = lr_hash_value(&a, alg, x);
    if (n != LEN[alg] || lr_hash_value(&b, alg, y) != n || memcmp(x, y, n) != 0) abort();
  }
  lr_hash_free(&a);
  lr_hash_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0 || size > 4096) return 0;
  char *v = malloc(size);
  if (!v) return 0;
  memcpy(v, data + 1, size - 1);
  v[size - 1] = '\0';
  int which = data[0] % 6;
  if (which == 4)
    check_range(v);
  else if (which == 5)
    check_hex(v);
  else
    check_fields(which, v);
  check_hashes(data, size);
  free(v);
  return 0;
}
