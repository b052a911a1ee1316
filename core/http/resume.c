/* resume.c: a download that ends early goes on where it stopped (see
 * luaretry_curl.h): the next attempt asks for the rest with Range and
 * If-Range, and only a 206 that fits exactly (its start, its total length,
 * its validator) is appended; anything else starts from zero.  RFC 9110
 * sections 13.1.5 (If-Range), 14.4 (Content-Range) and 8.8.1 (a weak ETag
 * is no validator for a range). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"

int lr_resume_init(lr_resume *rs, const luaretry_curl_resume *opt) {
  memset(rs, 0, sizeof *rs);
  rs->opt = opt;
  if (opt && opt->offset > 0) {
    rs->have = opt->offset;
    rs->initial = 1;
    if (opt->validator) snprintf(rs->validator, sizeof rs->validator, "%s", opt->validator);
  }
  return opt && opt->checksum && lr_digest_hex(opt->checksum, &rs->expect) != 0 ? -1 : 0;
}

void lr_resume_free(lr_resume *rs) { lr_hash_free(&rs->whole); }

static void forget(lr_resume *rs) {
  rs->have = rs->total = rs->end = 0;
  rs->validator[0] = '\0';
  rs->initial = 0;
}

/* "restarting the download from zero: why", once per call (every
 * attempt of a server that always breaks would say it again): now, when
 * the attempt under way starts over, or else when the next attempt begins
 * (lr_resume_before), so nothing is said of an attempt no other follows. */
static void note_restart(lr_resume *rs, const char *why, int now) {
  if (!rs->opt || !rs->opt->note || rs->restart_said) return;
  if (!now) {
    snprintf(rs->restart_note, sizeof rs->restart_note, "%s", why);
    return;
  }
  char line[300];
  snprintf(line, sizeof line, "restarting the download from zero: %s", why);
  rs->opt->note(rs->opt->note_ud, line);
  rs->restart_said = 1;
  rs->restart_note[0] = '\0';
}

int lr_resume_before(lr_resume *rs, const luaretry_request *r, struct curl_slist **list) {
  if (rs->restart_note[0]) note_restart(rs, rs->restart_note, 1);
  rs->asking = rs->decided = rs->bad_range = rs->drop = rs->aside = 0;
  rs->end = 0;
  rs->why[0] = '\0';
  int get = !r->body && (!r->method || strcmp(r->method, "GET") == 0);
  if (!rs->opt || !get || rs->have == 0 || (!rs->validator[0] && !rs->initial)) {
    forget(rs);
    return 0;
  }
  char line[300];
  snprintf(line, sizeof line, "Range: bytes=%" PRIu64 "-", rs->have);
  struct curl_slist *next = curl_slist_append(*list, line);
  if (!next) return -1;
  *list = next;
  if (rs->validator[0]) {
    snprintf(line, sizeof line, "If-Range: %s", rs->validator);
    if (!(next = curl_slist_append(*list, line))) return -1;
    *list = next;
  }
  rs->asking = 1;
  return 0;
}

/* The first header of that (lower-case) name among t's pairs, or NULL. */
static const char *header(const lr_transfer *t, const char *name) {
  const char *s = t->header_text.data, *end = s + t->header_text.len;
  while (s && s < end) {
    const char *value = s + strlen(s) + 1;
    if (strcmp(s, name) == 0) return value;
    s = value + strlen(value) + 1;
  }
  return NULL;
}

/* "bytes FIRST-LAST/TOTAL" (TOTAL may be "*": 0) into r[0..2]; 0, or -1
 * if it is not one (digits only, no sign, no overflow, LAST < TOTAL). */
int lr_content_range(const char *v, uint64_t r[3]) {
  if (!v || strncmp(v, "bytes ", 6) != 0) return -1;
  const char *s = v + 6;
  for (int i = 0; i < 3; i++) {
    if (i == 2 && *s == '*') {
      r[2] = 0, s++;
      break;
    }
    if (*s < '0' || *s > '9') return -1;
    uint64_t n = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
      if (n > (UINT64_MAX - 9) / 10) return -1;
      n = n * 10 + (uint64_t)(*s - '0');
    }
    r[i] = n;
    if (i < 2 && *s++ != (i == 0 ? '-' : '/')) return -1;
  }
  while (*s == ' ' || *s == '\t') s++;
  if (*s || r[1] < r[0] || (r[2] && r[1] >= r[2])) return -1;
  return 0;
}

/* The validator this answer names: a strong ETag, else Last-Modified. */
static const char *validator_of(const lr_transfer *t) {
  const char *etag = header(t, "etag");
  if (etag && etag[0] == '"') return etag;
  return header(t, "last-modified");
}

/* Starts the sink over at this answer's first byte; -1 if it refused.
 * now: this answer is written from zero (else it fails the attempt, and
 * the next one starts from zero). */
static int start_over(lr_transfer *t, const char *why, int now) {
  lr_resume *rs = t->resume;
  if (rs->have > 0) note_restart(rs, why, now);
  forget(rs);
  return t->restart && t->restart(t->stream_ud) != 0 ? -1 : 0;
}

/* Why a 206 cannot be appended, into rs->why; "" when it can: it starts
 * where the sink ends, its length is what its range says, its total is the
 * one known, its validator the same. */
static void check_partial(lr_transfer *t) {
  lr_resume *rs = t->resume;
  uint64_t r[3];
  const char *v = validator_of(t), *length = header(t, "content-length");
  if (lr_content_range(header(t, "content-range"), r) != 0)
    snprintf(rs->why, sizeof rs->why, "a 206 without a usable Content-Range");
  else if (r[0] != rs->have)
    snprintf(rs->why, sizeof rs->why,
             "the server's part starts at byte %" PRIu64 ", not at %" PRIu64, r[0], rs->have);
  else if (rs->total && r[2] && r[2] != rs->total)
    snprintf(rs->why, sizeof rs->why, "the total length is now %" PRIu64 " bytes, not %" PRIu64,
             r[2], rs->total);
  else if (length && strtoull(length, NULL, 10) != r[1] - r[0] + 1)
    snprintf(rs->why, sizeof rs->why,
             "the server's part (bytes %" PRIu64 "-%" PRIu64 ") is %" PRIu64
             " bytes, but its Content-Length says %.40s",
             r[0], r[1], r[1] - r[0] + 1, length);
  else if (rs->validator[0] && v && strcmp(v, rs->validator) != 0)
    snprintf(rs->why, sizeof rs->why, "the validator changed (%.80s, was %.80s)", v, rs->validator);
  else {
    if (r[2]) rs->total = r[2];
    rs->end = r[1] + 1;
  }
}

int lr_resume_body(lr_transfer *t, size_t len) {
  lr_resume *rs = t->resume;
  if (!rs->end || rs->have + len <= rs->end) return 0;
  snprintf(
    rs->why, sizeof rs->why,
    "the server's part carries more bytes than its Content-Range, which ends at byte %" PRIu64,
    rs->end);
  rs->bad_range = 1;
  start_over(t, rs->why, 0);
  return -1;
}

const char *lr_resume_short(lr_resume *rs) {
  /* an answer that could not be appended and had no body to refuse (a
   * 416 with Content-Length: 0): no write failed to name it "range", and
   * judged by its status it would end the call */
  if (rs->bad_range) return rs->why;
  rs->why[0] = '\0';
  if (rs->end && rs->have != rs->end)
    snprintf(rs->why, sizeof rs->why,
             "the server's part ended at byte %" PRIu64 ", not at %" PRIu64
             " as its Content-Range said",
             rs->have, rs->end);
  else if (rs->end && rs->total && rs->have != rs->total)
    snprintf(rs->why, sizeof rs->why,
             "the server's part ends at byte %" PRIu64 " of %" PRIu64
             ": the rest is asked for next",
             rs->have, rs->total);
  return rs->why;
}

int lr_resume_first_byte(lr_transfer *t) {
  lr_resume *rs = t->resume;
  rs->decided = 1;
  if (!rs->asking) return 0;
  if (t->status_code == 206) {
    check_partial(t);
    if (!rs->why[0]) return 0; /* it fits: appended */
  } else if (t->status_code == 200) {
    return start_over(t, "the server sent the whole resource (200) instead of the rest", 1);
  } else if (t->status_code == 416 && rs->initial && !rs->validator[0]) {
    /* -C - of a file that is whole already: it stays as it is */
    rs->drop = 1;
    return 0;
  } else if (t->status_code >= 400 && t->status_code != 416) {
    /* an error answer (a load balancer's 503, a 429) says nothing of the
     * resource: only a 200 says the validator changed, only a 416 that the
     * range is wrong (RFC 9110 13.1.5, 15.5.17).  The sink keeps what it
     * holds, the next attempt asks for the same range, and the body goes
     * to the script alone */
    rs->aside = 1;
    return 0;
  } else if (t->status_code == 416) {
    /* our own range is past the resource's end: the bytes held are not
     * its first ones (it shrank or changed; RFC 9110 15.5.17).  The 416
     * says nothing else, and judged as an answer it ended the call final
     * while the line said the download restarts: the attempt fails as
     * "range" (transient) and the next one asks from zero */
    snprintf(rs->why, sizeof rs->why,
             "the server answered the Range request with 416 (Range Not Satisfiable)");
  } else {
    /* another answer (a redirect not followed, a 204): written from
     * zero, and judged as any answer */
    char why[64];
    snprintf(why, sizeof why, "the server answered the Range request with %ld", t->status_code);
    return start_over(t, why, 1);
  }
  /* a 206 that does not fit (or a 416) is never written: the attempt
   * fails, and the next one starts from zero */
  rs->bad_range = 1;
  start_over(t, rs->why, 0);
  return -1;
}

void lr_resume_after(lr_resume *rs, const luaretry_outcome *out, long status) {
  if (!rs->opt || rs->bad_range) return;  /* a bad range: forgotten already */
  if (rs->aside) return;                  /* an error answer: the sink as it was */
  if (out->error && !rs->decided) return; /* no body came: as it was */
  /* only the resource's own bytes are resumed, never an error page's */
  if (out->error && strstr(out->error, "_mismatch")) {
    /* checksum_mismatch is final: no attempt follows to restart */
    if (strcmp(out->error, "digest_mismatch") == 0) note_restart(rs, "its digest did not match", 0);
    forget(rs);
    return;
  }
  if (!luaretry_curl_resumable(out) || rs->have == 0 || (status != 200 && status != 206)) {
    if (out->error && rs->have > 0 && (status == 200 || status == 206))
      note_restart(rs, "the server named no range support or no strong validator to resume it with",
                   0);
    forget(rs);
    return;
  }
  const char *v = NULL, *etag = NULL, *lm = NULL, *range = NULL, *length = NULL;
  for (size_t i = 0; i < out->header_count; i++) {
    const luaretry_header *h = &out->headers[i];
    if (!etag && strcmp(h->name, "etag") == 0) etag = h->value;
    if (!lm && strcmp(h->name, "last-modified") == 0) lm = h->value;
    if (!range && strcmp(h->name, "content-range") == 0) range = h->value;
    if (!length && strcmp(h->name, "content-length") == 0) length = h->value;
  }
  v = etag && etag[0] == '"' ? etag : lm;
  snprintf(rs->validator, sizeof rs->validator, "%s", v ? v : "");
  uint64_t r[3];
  if (range && lr_content_range(range, r) == 0 && r[2])
    rs->total = r[2];
  else if (!range && length)
    rs->total = strtoull(length, NULL, 10);
  rs->initial = 0;
}

int lr_resume_end(lr_transfer *t, const luaretry_decision *final) {
  lr_resume *rs = t->resume;
  /* the host's own file (-C -, an offset without validator) keeps what it
   * held, as a failed call leaves it */
  if (!rs || !rs->aside || final->reason == LUARETRY_REASON_DEADLINE ||
      final->reason == LUARETRY_REASON_CANCELLED || (rs->opt->offset > 0 && !rs->opt->validator))
    return 0;
  /* the call's result is that error answer: what the sink shows, as any
   * final answer's body (standard output shows it) */
  rs->aside = 0;
  forget(rs);
  return lr_curl_give_body(t->stream, t->restart, t->stream_ud, t->body.data, t->body.len,
                           t->detail, sizeof t->detail);
}

/* A 206 is itself proof that the server serves ranges (nginx's carries no
 * Accept-Ranges): a Content-Range of bytes, not "bytes *" of a 416. */
int luaretry_curl_resumable(const luaretry_outcome *o) {
  /* too_large: the limit is the whole body's, so the next attempt starts
   * from zero (resumed, each attempt would bring the limit's worth) */
  if (!o || !o->error || strcmp(o->error, "range") == 0 || strcmp(o->error, "tls_verify") == 0 ||
      strcmp(o->error, "too_large") == 0 || strstr(o->error, "_mismatch"))
    return 0;
  int ranges = 0, validator = 0;
  uint64_t r[3];
  for (size_t i = 0; o->headers && i < o->header_count; i++) {
    const luaretry_header *h = &o->headers[i];
    if (!h->name || !h->value) continue; /* a host's outcome: no header there */
    /* an encoded answer: decoded (--compressed, CURLOPT_ACCEPT_ENCODING),
     * the bytes held are not the ones a Range counts, and a slice from the
     * middle of a gzip stream never decodes */
    if (strcmp(h->name, "content-encoding") == 0 && strcasecmp(h->value, "identity") != 0 &&
        h->value[0])
      return 0;
    if (strcmp(h->name, "accept-ranges") == 0 && strcasestr(h->value, "bytes")) ranges = 1;
    if (strcmp(h->name, "content-range") == 0 && lr_content_range(h->value, r) == 0) ranges = 1;
    if (strcmp(h->name, "etag") == 0 && h->value[0] == '"') validator = 1;
    if (strcmp(h->name, "last-modified") == 0 && h->value[0]) validator = 1;
  }
  return ranges && validator;
}
