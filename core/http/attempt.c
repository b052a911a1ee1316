/* attempt.c: one attempt of a request through libcurl: the options set on
 * the easy handle, the body and headers received, the transport failure's
 * name, Retry-After, and one transfer on the thread's multi handle that a
 * cancel (any thread, or a signal handler writing the call's wakeup fd)
 * interrupts at once, not at curl's next progress tick. */
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http.h"

double lr_curl_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void buf_add(buffer *b, const char *s, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) { b->failed = 1; return; }
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}


static size_t on_body(char *data, size_t size, size_t n, void *ud) {
  transfer *t = ud;
  buf_add(&t->body, data, size * n);
  return t->body.failed ? 0 : size * n;
}

/* Keeps the headers of the last response only: a new status line (after
 * a 100 Continue or a redirect) starts afresh. */
static size_t on_header(char *data, size_t size, size_t n, void *ud) {
  transfer *t = ud;
  size_t len = size * n;
  if (len >= 5 && memcmp(data, "HTTP/", 5) == 0) {
    t->header_text.len = 0;
    return len;
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

void lr_curl_index_headers(transfer *t) {
  t->header_count = 0;
  const char *s = t->header_text.data, *end = s + t->header_text.len;
  int retry_after_kept = 0;
  double now = -1;
  while (s && s < end && t->header_count < MAX_HEADERS) {
    const char *value = s + strlen(s) + 1;
    const char *name = s;
    s = value + strlen(value) + 1;
    if (strcmp(name, "retry-after") == 0) {
      /* only the first valid one, so the script reads what the engine uses */
      if (now < 0) now = realtime_now();
      if (retry_after_kept || luaretry_retry_after(value, now) < 0) continue;
      retry_after_kept = 1;
    }
    t->headers[t->header_count].name = name;
    t->headers[t->header_count].value = value;
    t->header_count++;
  }
}

static size_t on_read(char *dst, size_t size, size_t n, void *ud) {
  transfer *t = ud;
  size_t left = t->upload_len - t->upload_pos, want = size * n;
  if (want > left) want = left;
  memcpy(dst, t->upload + t->upload_pos, want);
  t->upload_pos += want;
  return want;
}

/* curl rewinds through here after a partial send (redirect, auth, retry
 * on a reused connection): the body is always sent whole. */
static int on_seek(void *ud, curl_off_t offset, int origin) {
  transfer *t = ud;
  if (origin != SEEK_SET || offset < 0 || (size_t)offset > t->upload_len)
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
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_CIPHER:
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_SSL_ISSUER_ERROR: return "tls";
  case CURLE_WEIRD_SERVER_REPLY:
  case CURLE_HTTP2:
  case CURLE_HTTP2_STREAM:
  case CURLE_BAD_CONTENT_ENCODING: return "protocol";
  default: return "transport";
  }
}

int luaretry_curl_never_sent(CURLcode rc) {
  return rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
         rc == CURLE_COULDNT_RESOLVE_PROXY;
}

/* The first Retry-After that reads as a wait (of several, the first valid
 * one counts, for the engine as for the script), or -1. */
static double retry_after(const transfer *t) {
  double now = -1;
  for (size_t i = 0; i < t->header_count; i++) {
    if (strcmp(t->headers[i].name, "retry-after") != 0) continue;
    if (now < 0) now = realtime_now();
    double w = luaretry_retry_after(t->headers[i].value, now);
    if (w >= 0) return w;
  }
  return -1;
}

struct curl_slist *lr_curl_header_list(const luaretry_request *r, int *failed) {
  struct curl_slist *list = NULL;
  for (size_t i = 0; i < r->header_count; i++) {
    size_t n = strlen(r->headers[i].name) + strlen(r->headers[i].value) + 3;
    char *line = malloc(n);
    if (!line) { *failed = 1; break; }
    /* "Name;" tells curl to send an empty header rather than drop it */
    if (r->headers[i].value[0])
      snprintf(line, n, "%s: %s", r->headers[i].name, r->headers[i].value);
    else
      snprintf(line, n, "%s;", r->headers[i].name);
    struct curl_slist *next = curl_slist_append(list, line);
    free(line);
    if (!next) { *failed = 1; break; }
    list = next;
  }
  return list;
}

void lr_curl_configure(CURL *h, const luaretry_request *r, transfer *t,
                      struct curl_slist *headers, double timeout) {
  curl_easy_setopt(h, CURLOPT_URL, r->url);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, t);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  const char *method = r->method;
  if (r->body) {
    t->upload = r->body;
    t->upload_len = r->body_len;
    t->upload_pos = 0;
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(h, CURLOPT_READDATA, t);
    curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
    curl_easy_setopt(h, CURLOPT_SEEKDATA, t);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
    if (method && strcmp(method, "POST") == 0) method = NULL;
  } else if (method && strcmp(method, "HEAD") == 0) {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    method = NULL;
  } else {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    if (method && strcmp(method, "GET") == 0) method = NULL;
  }
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
  long ms = timeout > 0 ? (long)ceil(timeout * 1000) : 0;
  if (timeout > 0 && ms < 1) ms = 1;
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ms);
}

/* ---- one attempt: the pieces luaretry_curl_perform and the batch share */


/* Before attempt `n` of call c: prepare(), is_idempotent(), the header
 * list, then every option of the attempt on h (timeout: `timeout`). */
luaretry_code lr_curl_attempt_setup(luaretry_call *c, const luaretry_request *req, int n,
                                   CURL *h, double timeout, attempt *a) {
  luaretry_code rc = luaretry_call_prepare(c, req, n, &a->r);
  if (rc != LUARETRY_OK) return rc;
  a->idempotent = 1;
  rc = luaretry_call_is_idempotent(c, &a->r, &a->idempotent);
  if (rc != LUARETRY_OK) return rc;
  int failed = 0;
  a->headers = lr_curl_header_list(&a->r, &failed);
  if (failed) {
    curl_slist_free_all(a->headers);
    a->headers = NULL;
    return LUARETRY_E_NOMEM;
  }
  a->t.body.len = a->t.header_text.len = 0;
  a->t.body.failed = a->t.header_text.failed = 0;
  lr_curl_configure(h, &a->r, &a->t, a->headers, timeout);
  return LUARETRY_OK;
}

/* After the transfer ended with `res`: the outcome to report, pointing
 * into a (valid until the next setup on it). */
luaretry_code lr_curl_attempt_finish(CURL *h, attempt *a, CURLcode res, luaretry_outcome *out) {
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
  curl_slist_free_all(a->headers);
  a->headers = NULL;
  if (a->t.body.failed || a->t.header_text.failed) return LUARETRY_E_NOMEM;
  lr_curl_index_headers(&a->t);
  luaretry_outcome_init(out);
  long status = 0;
  if (res == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  out->status = (int)status;
  out->error = luaretry_curl_error_name(res);
  out->body = a->t.body.data;
  out->body_len = a->t.body.len;
  out->headers = a->t.headers;
  out->header_count = a->t.header_count;
  out->method = a->r.method ? a->r.method : (a->r.body ? "POST" : "GET");
  out->url = a->r.url;
  out->not_repeatable = !a->idempotent && !luaretry_curl_never_sent(res);
  if (status) out->retry_after = retry_after(&a->t);
  return LUARETRY_OK;
}

void lr_curl_attempt_free(attempt *a) {
  curl_slist_free_all(a->headers);
  free(a->t.body.data);
  free(a->t.header_text.data);
  memset(a, 0, sizeof *a);
}

/* One transfer on the multi handle, woken by a cancel. */
CURLcode lr_curl_transfer_once(CURLM *m, CURL *h, luaretry_call *c) {
  CURLcode result = CURLE_OK;
  if (curl_multi_add_handle(m, h) != CURLM_OK) return CURLE_OUT_OF_MEMORY;
  int fd = c ? luaretry_call_wakeup_fd(c) : -1;
  for (;;) {
    int running = 0;
    if (curl_multi_perform(m, &running) != CURLM_OK) { result = CURLE_OUT_OF_MEMORY; break; }
    int left;
    CURLMsg *msg = curl_multi_info_read(m, &left);
    if (msg && msg->msg == CURLMSG_DONE) { result = msg->data.result; break; }
    if (!running) break;
    if (c && luaretry_call_cancelled(c)) { result = CURLE_ABORTED_BY_CALLBACK; break; }
    struct curl_waitfd wake = { fd, CURL_WAIT_POLLIN, 0 };
    curl_multi_poll(m, fd >= 0 ? &wake : NULL, fd >= 0 ? 1 : 0, fd >= 0 ? 1000 : 50, NULL);
  }
  curl_multi_remove_handle(m, h);
  return result;
}


/* ---- the thread's multi handle: its connection cache outlives calls */

static pthread_key_t multi_key;
static pthread_once_t multi_once = PTHREAD_ONCE_INIT;
static _Thread_local int multi_busy;

static void free_multi(void *m) { curl_multi_cleanup(m); }
static void make_key(void) { pthread_key_create(&multi_key, free_multi); }

/* One multi handle per thread, kept: a keep-alive connection opened by one
 * call serves the next call of that thread, as curl_easy_perform's own
 * handle does.  A call made from inside another (a sink that performs)
 * gets a private one. */
CURLM *lr_curl_multi_take(int *private_multi) {
  pthread_once(&multi_once, make_key);
  *private_multi = multi_busy;
  if (multi_busy) return curl_multi_init();
  CURLM *m = pthread_getspecific(multi_key);
  if (!m) {
    m = curl_multi_init();
    if (m && pthread_setspecific(multi_key, m) != 0) {
      *private_multi = 1;
      return m;
    }
  }
  if (m) multi_busy = 1;
  return m;
}

void lr_curl_multi_give(CURLM *m, int private_multi) {
  if (private_multi) curl_multi_cleanup(m);
  else multi_busy = 0;
}
