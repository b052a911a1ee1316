/* transfer.c: what libcurl sees of one transfer: the options set on the
 * easy handle and our callbacks, which keep a bounded part of the answer
 * (body_limit bytes of body, LUARETRY_CURL_MAX_HEADER_BYTES of headers),
 * stream the body on to the host, and read the upload from memory or from
 * the host; and the names of transport failures. */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http.h"

static void buf_add(lr_http_buffer *b, const char *s, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
      b->failed = 1;
      return;
    }
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

/* Keeps the first body_limit bytes for the script and streams every byte
 * to the host: a body of any length costs body_limit bytes here. */
static size_t on_body(char *data, size_t size, size_t n, void *ud) {
  lr_transfer *t = ud;
  size_t len = size * n;
  if (t->resume && !t->resume->decided && lr_resume_first_byte(t) != 0) return 0;
  if (t->resume && t->resume->drop) return len;
  if (t->resume && lr_resume_body(t, len) != 0) return 0;
  t->body_seen += len;
  size_t room = t->body_limit - t->body.len;
  if (len > room && t->limit_fails) {
    t->body_too_long = 1;
    snprintf(t->detail, sizeof t->detail, "the response body is longer than %zu bytes",
             t->body_limit);
    return 0;
  }
  buf_add(&t->body, data, len < room ? len : room);
  if (t->body.failed) return 0;
  /* an error answer to a Range request: the download's bytes stay */
  if (t->resume && t->resume->aside) return len;
  if (t->max_body && len > t->max_body - t->streamed) {
    t->too_large = 1; /* none of it written: as libcurl's stated-length check */
    return 0;
  }
  t->streamed += len;
  size_t took = t->stream ? t->stream(t->stream_ud, data, len) : len;
  if (took != len) {
    t->stream_failed = 1;
    snprintf(t->detail, sizeof t->detail, "the sink took %zu of %zu bytes of the body", took, len);
    return 0;
  }
  /* hashed as written: the sink's bytes are the ones verified */
  if (!t->digest_ready && lr_digest_begin(t) != 0) {
    t->body.failed = 1;
    return 0;
  }
  if (t->part.algs) lr_hash_add(&t->part, data, len);
  if (t->resume && t->resume->whole.algs) lr_hash_add(&t->resume->whole, data, len);
  if (t->resume) t->resume->have += len;
  return len;
}

/* Keeps the headers of the last response only: a new status line (after
 * a 100 Continue or a redirect) starts afresh.  An endless or huge head is
 * cut at LUARETRY_CURL_MAX_HEADER_BYTES (counting every line, kept or not)
 * and fails the transfer, so no server can make us hold more. */
static size_t on_header(char *data, size_t size, size_t n, void *ud) {
  lr_transfer *t = ud;
  size_t len = size * n;
  if (len >= 5 && memcmp(data, "HTTP/", 5) == 0) {
    const char *sp = memchr(data, ' ', len);
    t->status_code = sp ? strtol(sp + 1, NULL, 10) : 0;
    t->header_text.len = 0;
    t->head_bytes = len;
    return len;
  }
  t->head_bytes += len;
  if (t->head_bytes > LUARETRY_CURL_MAX_HEADER_BYTES) {
    t->headers_too_long = 1;
    snprintf(t->detail, sizeof t->detail, "the response's headers are longer than %d bytes",
             LUARETRY_CURL_MAX_HEADER_BYTES);
    return 0;
  }
  const char *colon = memchr(data, ':', len);
  if (!colon || colon == data) return len;
  size_t name_len = (size_t)(colon - data);
  const char *v = colon + 1, *end = data + len;
  while (v < end && (*v == ' ' || *v == '\t')) v++;
  while (end > v && isspace((unsigned char)end[-1])) end--;
  char lower[256];
  if (name_len >= sizeof lower) return len;
  for (size_t i = 0; i < name_len; i++) lower[i] = (char)tolower((unsigned char)data[i]);
  buf_add(&t->header_text, lower, name_len);
  buf_add(&t->header_text, "", 1);
  buf_add(&t->header_text, v, (size_t)(end - v));
  buf_add(&t->header_text, "", 1);
  return len;
}

static double realtime_now(void) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

/* Room for every pair of header_text in t->headers. */
static int reserve_headers(lr_transfer *t) {
  size_t pairs = 0;
  for (size_t i = 0; i < t->header_text.len; i++) pairs += t->header_text.data[i] == '\0';
  pairs /= 2;
  if (pairs <= t->header_cap) return 0;
  luaretry_header *h = realloc(t->headers, pairs * sizeof *h);
  if (!h) return -1;
  t->headers = h;
  t->header_cap = pairs;
  return 0;
}

int lr_curl_index_headers(lr_transfer *t) {
  t->header_count = 0;
  if (reserve_headers(t) != 0) return -1;
  const char *s = t->header_text.data, *end = s + t->header_text.len;
  int retry_after_kept = 0;
  double now = -1;
  while (s && s < end && t->header_count < t->header_cap) {
    const char *value = s + strlen(s) + 1;
    const char *name = s;
    s = value + strlen(value) + 1;
    if (strcmp(name, "retry-after") == 0) {
      /* only the first valid one, so the script reads what the engine uses */
      if (now < 0) now = realtime_now();
      double w;
      if (retry_after_kept || luaretry_retry_after(value, now, &w) != LUARETRY_OK) continue;
      retry_after_kept = 1;
    }
    t->headers[t->header_count].name = name;
    t->headers[t->header_count].value = value;
    t->header_count++;
  }
  return 0;
}

/* The body from memory, or through the host's reader (pread-like, so the
 * whole body is never held here). */
static size_t on_read(char *dst, size_t size, size_t n, void *ud) {
  lr_transfer *t = ud;
  size_t left = t->upload_len - t->upload_pos, want = size * n;
  if (want > left) want = left;
  if (want == 0) return 0;
  if (t->reader) {
    size_t got = t->reader(t->reader_ud, (uint64_t)t->upload_pos, dst, want);
    if (got == 0 || got > want) {
      t->upload_failed = 1;
      snprintf(t->detail, sizeof t->detail,
               "the upload function gave %zu bytes at offset %zu (1 to %zu wanted)", got,
               t->upload_pos, want);
      return CURL_READFUNC_ABORT;
    }
    want = got;
  } else {
    memcpy(dst, t->upload + t->upload_pos, want);
  }
  t->upload_pos += want;
  return want;
}

/* curl rewinds through here after a partial send (redirect, auth, retry
 * on a reused connection): the body is always sent whole. */
static int on_seek(void *ud, curl_off_t offset, int origin) {
  lr_transfer *t = ud;
  if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > (uint64_t)t->upload_len)
    return CURL_SEEKFUNC_CANTSEEK;
  t->upload_pos = (size_t)offset;
  return CURL_SEEKFUNC_OK;
}

const char *luaretry_curl_error_name(CURLcode rc) {
  switch (rc) {
  case CURLE_OK: return NULL;
  case CURLE_COULDNT_CONNECT: return "connect";
  case CURLE_OPERATION_TIMEDOUT: return "timeout";
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_RESOLVE_PROXY: return "dns";
  case CURLE_RECV_ERROR:
  case CURLE_SEND_ERROR:
  case CURLE_GOT_NOTHING: return "reset";
  case CURLE_PARTIAL_FILE: return "truncated";
  /* what no retry makes good: the peer is not who it says (or we cannot
   * tell), so retrying only hides an attack or a misconfiguration */
  case CURLE_PEER_FAILED_VERIFICATION: /* also CURLE_SSL_CACERT */
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_SSL_CRL_BADFILE:
  case CURLE_SSL_ISSUER_ERROR:
  case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
  case CURLE_SSL_INVALIDCERTSTATUS: return "tls_verify";
  /* the redirect limit the user set (--max-redirs, CURLOPT_MAXREDIRS):
   * the same chain again reaches the same limit */
  case CURLE_TOO_MANY_REDIRECTS: return "too_many_redirects";
  /* the host's size limit (curl's --max-filesize): as large again */
  case CURLE_FILESIZE_EXCEEDED: return "too_large";
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_CIPHER: return "tls";
  case CURLE_WEIRD_SERVER_REPLY:
  case CURLE_HTTP2:
  case CURLE_HTTP2_STREAM:
  case CURLE_BAD_CONTENT_ENCODING:
  case CURLE_UNSUPPORTED_PROTOCOL: return "protocol";
  default: return "transport";
  }
}

int luaretry_curl_never_sent(CURLcode rc) {
  return rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
         rc == CURLE_COULDNT_RESOLVE_PROXY;
}

void lr_curl_failure(const lr_transfer *t, CURLcode res, const char **error, const char **detail) {
  if (t->headers_too_long) {
    *error = "protocol";
    *detail = t->detail;
  } else if (t->resume && t->resume->bad_range) {
    *error = "range";
    *detail = t->resume->why;
  } else if (t->body_too_long) {
    *error = "transport";
    *detail = t->detail;
  } else if (t->too_large) {
    *error = "too_large"; /* what CURLE_FILESIZE_EXCEEDED is named */
    *detail = "Maximum file size exceeded";
  } else if (res == CURLE_UNSUPPORTED_PROTOCOL && t->status_code >= 300 && t->status_code < 400) {
    /* a redirect to a scheme not followed (only http and https are): the
     * same answer leads there again, as curl's --retry judges it; not a
     * server's bad status line (HTTP/0.9, a version of its own), which
     * libcurl names with the same code */
    *error = "redirect_refused";
    *detail = t->errbuf[0] ? t->errbuf : curl_easy_strerror(res);
  } else if (res == CURLE_OPERATION_TIMEDOUT && t->stall_timeout > 0 &&
             strncmp(t->errbuf, "Operation too slow", 18) == 0) {
    /* libcurl's low-speed limit, not the attempt's timeout */
    *error = "stalled";
    *detail = t->errbuf;
  } else {
    *error = luaretry_curl_error_name(res);
    *detail = res == CURLE_OK ? NULL : t->errbuf[0] ? t->errbuf : curl_easy_strerror(res);
  }
}

struct curl_slist *lr_curl_header_list(const luaretry_request *r, int *failed) {
  struct curl_slist *list = NULL;
  for (size_t i = 0; i < r->header_count; i++) {
    const char *value = r->headers[i].value;
    size_t n = strlen(r->headers[i].name) + (value ? strlen(value) : 0) + 3;
    char *line = malloc(n);
    if (!line) {
      *failed = 1;
      break;
    }
    /* "Name;" tells curl to send an empty header rather than drop it;
     * "Name:" (a NULL value) to send none, its own included */
    if (!value)
      snprintf(line, n, "%s:", r->headers[i].name);
    else if (value[0])
      snprintf(line, n, "%s: %s", r->headers[i].name, value);
    else
      snprintf(line, n, "%s;", r->headers[i].name);
    struct curl_slist *next = curl_slist_append(list, line);
    free(line);
    if (!next) {
      *failed = 1;
      break;
    }
    list = next;
  }
  return list;
}

/* The method and body options: a body is sent through on_read, from
 * memory or the host's reader. */
static void configure_body(CURL *h, const luaretry_request *r, lr_transfer *t) {
  const char *method = r->method;
  t->upload_pos = 0;
  if (r->body) {
    t->upload = r->body;
    t->upload_len = r->body_len;
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(h, CURLOPT_READDATA, t);
    curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
    curl_easy_setopt(h, CURLOPT_SEEKDATA, t);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
    if (method && strcmp(method, "POST") == 0) method = NULL;
    /* Another method with a body (a PUT) keeps its body on a redirect:
     * libcurl would turn the POST it sends it as into a GET, while the
     * custom method stays, and a PUT with no body went (curl's -T keeps
     * them on a 301 and a 302 too).  A POST follows curl's rule, or the
     * host's own setting on h, left alone. */
    if (method) curl_easy_setopt(h, CURLOPT_POSTREDIR, (long)CURL_REDIR_POST_ALL);
  } else if (method && strcmp(method, "HEAD") == 0) {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    method = NULL;
  } else {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    if (method && strcmp(method, "GET") == 0) method = NULL;
  }
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
}

/* Seconds as libcurl's milliseconds: at least 1 for any time above 0, and
 * at most 1e15 (some 30,000 years), so 1e308 s converts without overflow;
 * 0 for none. */
static long ms_of(double seconds) {
  if (!(seconds > 0)) return 0;
  if (seconds >= 1e12) return 1000000000000000L;
  long ms = (long)ceil(seconds * 1000);
  return ms < 1 ? 1 : ms;
}

/* The connection's own limit (the policy's connect_timeout), when shorter
 * than the attempt's. */
void lr_curl_connect_timeout(CURL *h, double connect, double timeout) {
  if (!(connect > 0) || (timeout > 0 && connect >= timeout)) return;
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ms_of(connect));
}

void lr_curl_configure(CURL *h, const luaretry_request *r, lr_transfer *t,
                       struct curl_slist *headers, double timeout) {
  t->body.len = t->header_text.len = t->header_count = 0;
  t->body.failed = t->header_text.failed = 0;
  t->body_seen = t->head_bytes = 0;
  t->status_code = 0;
  t->body_too_long = t->stream_failed = t->headers_too_long = t->upload_failed = 0;
  t->too_large = 0;
  t->streamed = 0;
  t->errbuf[0] = t->detail[0] = '\0';
  curl_easy_setopt(h, CURLOPT_URL, r->url);
  /* no other scheme is reachable, not even through a redirect */
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, t->errbuf);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, t);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  configure_body(h, r, t);
  long ms = ms_of(timeout);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ms);
  /* a stall bounds the attempt, whatever its length: curl's --speed-time */
  long stall = t->stall_timeout > 0 ? (long)ceil(t->stall_timeout) : 0;
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, stall);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, stall ? t->stall_speed : 0L);
}

/* Back to curl's own defaults for these options (as curl_easy_init
 * leaves them): the host's earlier values are not known to us. */
void lr_curl_release(CURL *h) {
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, NULL);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, stdout);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, NULL);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, NULL);
  curl_easy_setopt(h, CURLOPT_READFUNCTION, NULL);
  curl_easy_setopt(h, CURLOPT_READDATA, stdin);
  curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, NULL);
  curl_easy_setopt(h, CURLOPT_SEEKDATA, NULL);
}
