/* attempt.c: one attempt of a request through libcurl: prepare() and
 * is_idempotent() before it, the outcome after it (status, the kept body
 * and headers, the transport failure's name and libcurl's own message,
 * Retry-After), and one transfer on the thread's multi handle that a
 * cancel (any thread, or a signal handler writing the call's wakeup fd)
 * interrupts at once, not at curl's next progress tick. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http.h"

double lr_curl_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double realtime_now(void) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

/* The first Retry-After that reads as a wait (of several, the first valid
 * one counts, for the engine as for the script), or -1. */
static double retry_after(const lr_transfer *t) {
  double now = -1;
  for (size_t i = 0; i < t->header_count; i++) {
    if (strcmp(t->headers[i].name, "retry-after") != 0) continue;
    if (now < 0) now = realtime_now();
    double w;
    if (luaretry_retry_after(t->headers[i].value, now, &w) == LUARETRY_OK) return w;
  }
  return -1;
}

/* Where this attempt's bytes go: the body streamed or kept whole, the
 * upload from the host's reader unless prepare() gave a body of its own. */
static void route_bodies(const luaretry_request *req, const lr_io *io, lr_http_attempt *a) {
  lr_transfer *t = &a->t;
  t->body_limit = io->restart || !io->sink ? io->body_limit : SIZE_MAX;
  t->limit_fails = io->limit_fails;
  t->stream = io->restart ? io->sink : NULL;
  t->max_body = io->restart ? io->max_body : 0;
  t->stream_ud = io->sink_ud;
  int own_body = a->r.body == req->body && a->r.body_len == req->body_len;
  t->reader = io->upload && own_body ? io->upload : NULL;
  t->reader_ud = io->upload_ud;
  t->restart = io->restart;
  t->resume = io->restart ? io->resume : NULL;
  t->call = io->resume;
  t->stall_timeout = io->stall_timeout;
  t->stall_speed = io->stall_speed;
  lr_hash_free(&t->part);
  t->digest_ready = t->coded = 0;
  memset(&t->said_whole, 0, sizeof t->said_whole);
  memset(&t->said_part, 0, sizeof t->said_part);
}

luaretry_code lr_curl_attempt_setup(luaretry_call *c, const luaretry_request *req, int n, CURL *h,
                                    double timeout, const lr_io *io, lr_http_attempt *a) {
  /* a workflow's request too: the policy's headers, not prepare() (the
   * call says which it is) */
  luaretry_code rc = luaretry_call_prepare(c, req, n, &a->r);
  if (rc != LUARETRY_OK) return rc;
  a->idempotent = 1;
  rc = luaretry_call_is_idempotent(c, &a->r, &a->idempotent);
  if (rc != LUARETRY_OK) return rc;
  int failed = 0;
  a->headers = lr_curl_header_list(&a->r, &failed);
  /* resuming: the sink keeps what it has, and the request asks for the rest */
  lr_resume *rs = io->restart ? io->resume : NULL;
  if (!failed && rs && lr_resume_before(rs, &a->r, &a->headers) != 0) failed = 1;
  if (!failed && io->restart && !(rs && rs->asking) && io->restart(io->sink_ud) != 0) {
    curl_slist_free_all(a->headers);
    a->headers = NULL;
    return LUARETRY_E_OPERATION;
  }
  if (failed) {
    curl_slist_free_all(a->headers);
    a->headers = NULL;
    return LUARETRY_E_NOMEM;
  }
  route_bodies(req, io, a);
  lr_curl_configure(h, &a->r, &a->t, a->headers, timeout);
  lr_curl_connect_timeout(h, luaretry_call_connect_timeout(c), timeout);
  return LUARETRY_OK;
}

luaretry_code lr_curl_attempt_finish(CURL *h, lr_http_attempt *a, CURLcode res,
                                     luaretry_outcome *out) {
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
  curl_slist_free_all(a->headers);
  a->headers = NULL;
  lr_transfer *t = &a->t;
  if (t->stream_failed || t->upload_failed) return LUARETRY_E_OPERATION;
  if (t->body.failed || t->header_text.failed || lr_curl_index_headers(t) != 0)
    return LUARETRY_E_NOMEM;
  luaretry_outcome_init(out);
  lr_curl_failure(t, res, &out->error, &out->error_detail);
  long status = 0;
  if (!out->error) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  out->status = (int)status;
  out->body = t->body.data;
  out->body_len = t->body.len;
  out->headers = t->headers;
  out->header_count = t->header_count;
  out->method = a->r.method ? a->r.method : (a->r.body ? "POST" : "GET");
  out->url = a->r.url;
  out->not_repeatable = !a->idempotent && !luaretry_curl_never_sent(res);
  if (status) out->retry_after = retry_after(t);
  if (t->resume) {
    /* an answer with no body at all still replaces what the sink held */
    if (t->resume->asking && !t->resume->decided && !out->error && lr_resume_first_byte(t) != 0 &&
        !t->resume->bad_range)
      return LUARETRY_E_OPERATION;
    /* a part that fitted but ended short of the total: the bytes are
     * right, the rest is asked for by the next attempt */
    if (!out->error && t->resume->decided && *lr_resume_short(t->resume)) {
      out->error = "truncated";
      out->error_detail = t->resume->why;
      out->status = 0;
    }
  }
  /* the whole answer came: it is what its server (and the host) said */
  const char *mismatch = NULL;
  /* a HEAD's fields describe the GET's body, which did not come */
  if (!out->error && status >= 200 && status < 300 && strcmp(out->method, "HEAD") != 0 &&
      !(t->resume && t->resume->drop))
    mismatch = lr_digest_check(t);
  if (mismatch) {
    out->error = mismatch;
    out->error_detail = t->detail;
    out->status = 0;
  }
  if (t->resume) {
    lr_resume_after(t->resume, out, t->status_code);
  }
  return LUARETRY_OK;
}

void lr_curl_attempt_free(lr_http_attempt *a) {
  curl_slist_free_all(a->headers);
  free(a->t.body.data);
  free(a->t.header_text.data);
  free(a->t.headers);
  lr_hash_free(&a->t.part);
  memset(a, 0, sizeof *a);
}

/* One transfer on the multi handle, woken by a cancel. */
CURLcode lr_curl_transfer_once(CURLM *m, CURL *h, luaretry_call *c) {
  CURLcode result = CURLE_OK;
  if (curl_multi_add_handle(m, h) != CURLM_OK) return CURLE_OUT_OF_MEMORY;
  int fd = c ? luaretry_call_wakeup_fd(c) : -1;
  for (;;) {
    int running = 0;
    if (curl_multi_perform(m, &running) != CURLM_OK) {
      result = CURLE_OUT_OF_MEMORY;
      break;
    }
    int left;
    CURLMsg *msg = curl_multi_info_read(m, &left);
    if (msg && msg->msg == CURLMSG_DONE) {
      result = msg->data.result;
      break;
    }
    if (!running) break;
    if (c && luaretry_call_cancelled(c)) {
      result = CURLE_ABORTED_BY_CALLBACK;
      break;
    }
    struct curl_waitfd wake = { fd, CURL_WAIT_POLLIN, 0 };
    curl_multi_poll(m, fd >= 0 ? &wake : NULL, fd >= 0 ? 1 : 0, fd >= 0 ? 1000 : 50, NULL);
  }
  curl_multi_remove_handle(m, h);
  return result;
}

/* ---- the thread's multi handle: its connection cache outlives calls */

/* A multi handle kept for a thread, and the fork it was made after. */
typedef struct lr_kept_multi {
  CURLM *m;
  unsigned forks;
  struct lr_kept_multi *next; /* abandoned ones, kept reachable */
} lr_kept_multi;

static pthread_key_t multi_key;
static pthread_once_t multi_once = PTHREAD_ONCE_INIT;
static _Thread_local int multi_busy;

/* Forks so far, counted in the child.  A kept handle made before the last
 * fork is the parent's: its keep-alive connections are sockets the parent
 * holds too, so a request the child sent on one would be answered to
 * whichever process read first.  The child abandons it: never used again,
 * never cleaned up (curl_multi_cleanup would close connections the parent
 * still uses, a TLS one with a close_notify written on the parent's
 * socket), only kept where it can be found, and makes its own. */
static atomic_uint forks;
static _Atomic(lr_kept_multi *) abandoned;
static void forked(void) { atomic_fetch_add(&forks, 1); }

static void abandon(lr_kept_multi *k) {
  k->next = atomic_load(&abandoned);
  while (!atomic_compare_exchange_weak(&abandoned, &k->next, k)) {
  }
}

static void free_multi(void *ud) {
  lr_kept_multi *k = ud;
  if (k->forks != atomic_load(&forks)) {
    abandon(k);
    return;
  }
  curl_multi_cleanup(k->m);
  free(k);
}

static void make_key(void) {
  pthread_key_create(&multi_key, free_multi);
  pthread_atfork(NULL, NULL, forked);
}

/* One multi handle per thread, kept: a keep-alive connection opened by one
 * call serves the next call of that thread, as curl_easy_perform's own
 * handle does.  A call made from inside another (a sink that performs)
 * gets a private one, and so does a thread whose handle could not be
 * kept. */
CURLM *lr_curl_multi_take(int *private_multi) {
  pthread_once(&multi_once, make_key);
  *private_multi = multi_busy;
  if (multi_busy) return curl_multi_init();
  lr_kept_multi *k = pthread_getspecific(multi_key);
  unsigned now = atomic_load(&forks);
  if (k && k->forks != now) { /* the parent's: see `forks` */
    pthread_setspecific(multi_key, NULL);
    abandon(k);
    k = NULL;
  }
  if (!k) {
    k = malloc(sizeof *k);
    CURLM *m = k ? curl_multi_init() : NULL;
    if (!m) {
      free(k);
      return NULL;
    }
    *k = (lr_kept_multi){ m, now, NULL };
    if (pthread_setspecific(multi_key, k) != 0) {
      free(k);
      *private_multi = 1;
      return m;
    }
  }
  multi_busy = 1;
  return k->m;
}

void lr_curl_multi_give(CURLM *m, int private_multi) {
  if (private_multi)
    curl_multi_cleanup(m);
  else
    multi_busy = 0;
}
