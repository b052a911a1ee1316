/* curl.c: HTTP requests performed under a policy through libcurl.  One
 * request (luaretry_curl_perform) runs each attempt on a private multi
 * handle so that a cancel (any thread, or a signal handler writing the
 * call's eventfd) interrupts a transfer at once, not at curl's next
 * progress tick; a batch (luaretry_curl_perform_many) drives many calls'
 * attempts through one multi handle from one loop.  Both make an attempt
 * with the same pieces: attempt_setup, then attempt_finish. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "luaretry_curl.h"

#define MAX_HEADERS 128

typedef struct {
  char *data;
  size_t len, cap;
  int failed;
} buffer;

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

typedef struct {
  buffer body;
  buffer header_text;           /* "name\0value\0" pairs of the last response */
  luaretry_header headers[MAX_HEADERS];
  size_t header_count;
  const char *upload;
  size_t upload_len, upload_pos;
} transfer;

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

static void index_headers(transfer *t) {
  t->header_count = 0;
  const char *s = t->header_text.data, *end = s + t->header_text.len;
  while (s && s < end && t->header_count < MAX_HEADERS) {
    const char *value = s + strlen(s) + 1;
    t->headers[t->header_count].name = s;
    t->headers[t->header_count].value = value;
    t->header_count++;
    s = value + strlen(value) + 1;
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

/* The request may never have left this machine: always safe to repeat. */
static int never_sent(CURLcode rc) {
  return rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
         rc == CURLE_COULDNT_RESOLVE_PROXY;
}

/* Retry-After as seconds from now: delta-seconds or an HTTP-date (parsed
 * by curl_getdate); -1 for negative, past or unparsable values. */
static double retry_after_seconds(const char *v) {
  while (*v == ' ' || *v == '\t') v++;
  if (!*v) return -1;
  const char *c = v;
  while (isdigit((unsigned char)*c)) c++;
  if (*c == '\0') {
    double s = strtod(v, NULL);
    return s > 1e9 ? 1e9 : s;
  }
  time_t when = curl_getdate(v, NULL);
  if (when == -1) return -1;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  double left = (double)when - ((double)now.tv_sec + (double)now.tv_nsec * 1e-9);
  return left >= 0 ? left : -1;
}

static const char *find_header(const transfer *t, const char *name) {
  for (size_t i = 0; i < t->header_count; i++)
    if (strcmp(t->headers[i].name, name) == 0) return t->headers[i].value;
  return NULL;
}

static struct curl_slist *header_list(const luaretry_request *r, int *failed) {
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

static void configure(CURL *h, const luaretry_request *r, transfer *t,
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

typedef struct {
  transfer t;                   /* body, headers, upload of this attempt */
  luaretry_request r;           /* the request as prepare() left it */
  struct curl_slist *headers;   /* set on the handle for the transfer */
  int idempotent;
} attempt;

/* Before attempt `n` of call c: prepare(), is_idempotent(), the header
 * list, then every option of the attempt on h (timeout: `timeout`). */
static luaretry_code attempt_setup(luaretry_call *c, const luaretry_request *req, int n,
                                   CURL *h, double timeout, attempt *a) {
  luaretry_code rc = lr_call_prepare(c, req, n, &a->r);
  if (rc != LUARETRY_OK) return rc;
  a->idempotent = 1;
  rc = lr_call_is_idempotent(c, &a->r, &a->idempotent);
  if (rc != LUARETRY_OK) return rc;
  int failed = 0;
  a->headers = header_list(&a->r, &failed);
  if (failed) {
    curl_slist_free_all(a->headers);
    a->headers = NULL;
    return LUARETRY_E_NOMEM;
  }
  a->t.body.len = a->t.header_text.len = 0;
  a->t.body.failed = a->t.header_text.failed = 0;
  configure(h, &a->r, &a->t, a->headers, timeout);
  return LUARETRY_OK;
}

/* After the transfer ended with `res`: the outcome to report, pointing
 * into a (valid until the next setup on it). */
static luaretry_code attempt_finish(CURL *h, attempt *a, CURLcode res, luaretry_outcome *out) {
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
  curl_slist_free_all(a->headers);
  a->headers = NULL;
  if (a->t.body.failed || a->t.header_text.failed) return LUARETRY_E_NOMEM;
  index_headers(&a->t);
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
  out->not_repeatable = !a->idempotent && !never_sent(res);
  const char *ra = status ? find_header(&a->t, "retry-after") : NULL;
  if (ra) out->retry_after = retry_after_seconds(ra);
  return LUARETRY_OK;
}

static void attempt_free(attempt *a) {
  curl_slist_free_all(a->headers);
  free(a->t.body.data);
  free(a->t.header_text.data);
  memset(a, 0, sizeof *a);
}

/* One transfer on the multi handle, woken by a cancel. */
static CURLcode transfer_once(CURLM *m, CURL *h, luaretry_call *c) {
  CURLcode result = CURLE_OK;
  if (curl_multi_add_handle(m, h) != CURLM_OK) return CURLE_OUT_OF_MEMORY;
  int fd = c ? lr_call_wakeup_fd(c) : -1;
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

luaretry_code luaretry_curl_perform(luaretry_policy *p, luaretry_call *c, CURL *h,
                                    const luaretry_request *req,
                                    const luaretry_curl_options *o,
                                    luaretry_decision *final) {
  if (!p || !c || !h || !req || !req->url || !final) return LUARETRY_E_ARG;
  memset(final, 0, sizeof *final);
  /* a call refused at begin (circuit open) never touches the network */
  luaretry_code next = luaretry_call_next(c, final);
  if (next != LUARETRY_OK || !final->retry) return next;
  CURLM *m = curl_multi_init();
  if (!m) return LUARETRY_E_NOMEM;
  attempt a;
  memset(&a, 0, sizeof a);
  luaretry_code rc = LUARETRY_OK;
  for (int n = 1;; n++) {
    rc = attempt_setup(c, req, n, h, luaretry_call_timeout(c), &a);
    if (rc != LUARETRY_OK) break;
    CURLcode res = transfer_once(m, h, c);
    luaretry_outcome out;
    rc = attempt_finish(h, &a, res, &out);
    if (rc != LUARETRY_OK) break;
    rc = luaretry_call_report(c, &out, final);
    if (rc != LUARETRY_OK) break;
    if (!final->retry) {
      if (final->reason != LUARETRY_REASON_CANCELLED && o && o->sink && a.t.body.len)
        o->sink(o->sink_ud, a.t.body.data, a.t.body.len);
      break;
    }
    if (luaretry_call_wait(c, final->wait) == LUARETRY_E_CANCELLED) {
      lr_call_stop_cancelled(c, final);
      break;
    }
    rc = luaretry_call_next(c, final);  /* the breaker may have opened meanwhile */
    if (rc != LUARETRY_OK || !final->retry) break;
  }
  curl_easy_setopt(h, CURLOPT_READDATA, NULL);
  attempt_free(&a);
  curl_multi_cleanup(m);
  return rc;
}

/* ---- many calls through one multi handle */

struct luaretry_curl_many {
  CURLM *multi;
  int wake_fd;                  /* eventfd written by a cancel */
  atomic_int cancelled;
};

luaretry_code luaretry_curl_many_new(luaretry_curl_many **out) {
  if (!out) return LUARETRY_E_ARG;
  *out = NULL;
  luaretry_curl_many *m = calloc(1, sizeof *m);
  if (!m) return LUARETRY_E_NOMEM;
  atomic_init(&m->cancelled, 0);
  m->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (m->wake_fd < 0) {
    free(m);
    return LUARETRY_E_SYSTEM;
  }
  m->multi = curl_multi_init();
  if (!m->multi) {
    close(m->wake_fd);
    free(m);
    return LUARETRY_E_NOMEM;
  }
  *out = m;
  return LUARETRY_OK;
}

void luaretry_curl_many_free(luaretry_curl_many *m) {
  if (!m) return;
  curl_multi_cleanup(m->multi);
  close(m->wake_fd);
  free(m);
}

void luaretry_curl_many_cancel(luaretry_curl_many *m) {
  if (!m) return;
  int saved = errno;
  atomic_store(&m->cancelled, 1);
  uint64_t one = 1;
  ssize_t n = write(m->wake_fd, &one, sizeof one);
  (void)n;  /* a full counter is already readable: the loop wakes anyway */
  errno = saved;
}

int luaretry_curl_many_cancelled(const luaretry_curl_many *m) {
  return m ? atomic_load(&((luaretry_curl_many *)m)->cancelled) : 0;
}

CURLM *luaretry_curl_many_multi(luaretry_curl_many *m) { return m ? m->multi : NULL; }

void luaretry_curl_many_options_init(luaretry_curl_many_options *o) {
  if (o) memset(o, 0, sizeof *o);
}

typedef struct slot slot;

/* A call in progress: in a transfer (s != NULL) or waiting until `due`. */
typedef struct {
  luaretry_call *c;
  CURL *h;
  size_t job;
  int next;                     /* the number of its next attempt */
  double due;                   /* monotonic seconds */
  slot *s;
} live_call;

/* A transfer slot: its attempt's buffers, and the call using it. */
struct slot {
  attempt a;
  live_call *call;
};

typedef struct {
  luaretry_curl_many *m;
  luaretry_policy *p;
  luaretry_curl_job *jobs;
  size_t n, next_job;
  const luaretry_curl_many_options *o;
  luaretry_call_options copt;
  double deadline;              /* the policy's, to clip late retries */
  slot *slots;
  size_t nslots, busy;
  live_call *calls;             /* max_calls entries; c == NULL: free */
  size_t ncalls, nlive;
} batch;

static void finish_job(batch *b, size_t i, luaretry_code code, const luaretry_decision *d,
                       luaretry_call *c) {
  luaretry_curl_job *job = &b->jobs[i];
  luaretry_curl_result *r = &job->result;
  r->code = code;
  if (d) r->final = *d;
  r->elapsed = c ? luaretry_call_elapsed(c) : 0;
  if (code != LUARETRY_OK) {
    const char *pm = luaretry_policy_errmsg(b->p);
    r->errmsg = pm && pm[0] ? pm : c ? luaretry_call_errmsg(c) : luaretry_strerror(code);
  }
  if (b->o->done) b->o->done(b->o->done_ud, i, job);
  r->final.message = NULL;
  r->final.hook_error = NULL;
  r->errmsg = NULL;
}

static void end_call(batch *b, live_call *lc, luaretry_code code, const luaretry_decision *d) {
  finish_job(b, lc->job, code, d, lc->c);
  luaretry_call_free(lc->c);
  curl_easy_cleanup(lc->h);
  memset(lc, 0, sizeof *lc);
  b->nlive--;
}

/* Begins the next job's call; NULL when it ended at once (refused) or the
 * call table is full. */
static live_call *begin_next(batch *b) {
  live_call *lc = NULL;
  for (size_t k = 0; k < b->ncalls && !lc; k++)
    if (!b->calls[k].c) lc = &b->calls[k];
  if (!lc) return NULL;
  size_t i = b->next_job++;
  luaretry_curl_job *job = &b->jobs[i];
  luaretry_call_options opt = b->copt;
  if (opt.flags & LUARETRY_CALL_SEED) opt.seed += i;
  luaretry_call *c = NULL;
  luaretry_code rc = luaretry_call_begin(b->p, &opt, &c);
  if (rc != LUARETRY_OK) {
    finish_job(b, i, rc, NULL, NULL);
    return NULL;
  }
  luaretry_call_observe(c, job->observer, job->observer_ud);
  CURL *h = b->o->easy ? curl_easy_duphandle(b->o->easy) : curl_easy_init();
  if (!h) {
    finish_job(b, i, LUARETRY_E_NOMEM, NULL, c);
    luaretry_call_free(c);
    return NULL;
  }
  curl_easy_setopt(h, CURLOPT_PRIVATE, (void *)lc);
  lc->c = c;
  lc->h = h;
  lc->job = i;
  lc->next = 1;
  lc->s = NULL;
  b->nlive++;
  return lc;
}

/* Starts lc's next attempt on a free slot; ends the call instead when it
 * may not go on. */
static void start_attempt(batch *b, live_call *lc) {
  luaretry_decision d;
  luaretry_code rc = luaretry_call_next(lc->c, &d);
  if (rc != LUARETRY_OK || !d.retry) {
    end_call(b, lc, rc, &d);
    return;
  }
  slot *s = NULL;
  for (size_t k = 0; k < b->nslots && !s; k++)
    if (!b->slots[k].call) s = &b->slots[k];
  /* the attempt's timeout, clipped again when a full table made it late */
  double timeout = luaretry_call_timeout(lc->c);
  if (b->deadline > 0) {
    double left = b->deadline - luaretry_call_elapsed(lc->c);
    if (left < 0.001) left = 0.001;
    if (timeout == 0 || left < timeout) timeout = left;
  }
  const luaretry_request *req = b->jobs[lc->job].request;
  rc = attempt_setup(lc->c, req, lc->next, lc->h, timeout, &s->a);
  if (rc == LUARETRY_OK && curl_multi_add_handle(b->m->multi, lc->h) != CURLM_OK) {
    curl_easy_setopt(lc->h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(s->a.headers);
    s->a.headers = NULL;
    rc = LUARETRY_E_NOMEM;
  }
  if (rc != LUARETRY_OK) {
    memset(&d, 0, sizeof d);
    d.attempt = lc->next - 1;
    d.elapsed = luaretry_call_elapsed(lc->c);
    end_call(b, lc, rc, &d);
    return;
  }
  s->call = lc;
  lc->s = s;
  b->busy++;
}

/* A transfer ended with `res`: report it and follow the decision. */
static void end_attempt(batch *b, live_call *lc, CURLcode res) {
  slot *s = lc->s;
  curl_multi_remove_handle(b->m->multi, lc->h);
  s->call = NULL;
  lc->s = NULL;
  b->busy--;
  lc->next++;
  luaretry_outcome out;
  luaretry_decision d;
  memset(&d, 0, sizeof d);
  luaretry_code rc = attempt_finish(lc->h, &s->a, res, &out);
  if (rc == LUARETRY_OK) rc = luaretry_call_report(lc->c, &out, &d);
  luaretry_curl_job *job = &b->jobs[lc->job];
  if (rc == LUARETRY_OK) {
    job->result.status = out.status;
    job->result.error = out.error;
  }
  if (rc != LUARETRY_OK || !d.retry) {
    if (rc == LUARETRY_OK && d.reason != LUARETRY_REASON_CANCELLED && job->sink &&
        s->a.t.body.len)
      job->sink(job->sink_ud, s->a.t.body.data, s->a.t.body.len);
    end_call(b, lc, rc, &d);
    return;
  }
  if (b->copt.flags & LUARETRY_CALL_VIRTUAL_TIME) {
    luaretry_call_wait(lc->c, d.wait);  /* advances the call's clock only */
    lc->due = 0;
  } else {
    lc->due = lr_monotonic_now() + d.wait;
  }
}

/* Cancelled: every call in progress stops, the jobs not begun end too. */
static void cancel_all(batch *b) {
  for (size_t k = 0; k < b->ncalls; k++) {
    live_call *lc = &b->calls[k];
    if (!lc->c) continue;
    luaretry_call_cancel(lc->c);
    if (lc->s) {
      /* as luaretry_curl_perform does: the attempt is reported, and the
       * report stops the call as cancelled */
      end_attempt(b, lc, CURLE_ABORTED_BY_CALLBACK);
      if (!lc->c) continue;
    }
    luaretry_decision d;
    memset(&d, 0, sizeof d);
    d.attempt = lc->next - 1;
    lr_call_stop_cancelled(lc->c, &d);
    end_call(b, lc, LUARETRY_OK, &d);
  }
  while (b->next_job < b->n) {
    luaretry_decision d;
    memset(&d, 0, sizeof d);
    d.reason = LUARETRY_REASON_CANCELLED;
    d.rule = "cancel";
    finish_job(b, b->next_job++, LUARETRY_OK, &d, NULL);
  }
}

static void run_batch(batch *b) {
  CURLM *multi = b->m->multi;
  for (;;) {
    if (atomic_load(&b->m->cancelled)) {
      cancel_all(b);
      return;
    }
    /* start what may start: due retries first, then new calls */
    double now = lr_monotonic_now(), next_due = -1;
    for (size_t k = 0; k < b->ncalls; k++) {
      live_call *lc = &b->calls[k];
      if (!lc->c || lc->s) continue;
      if (lc->due <= now && b->busy < b->nslots) start_attempt(b, lc);
      else if (next_due < 0 || lc->due < next_due) next_due = lc->due;
    }
    while (b->busy < b->nslots && b->next_job < b->n && b->nlive < b->ncalls) {
      live_call *lc = begin_next(b);
      if (lc) start_attempt(b, lc);
    }
    if (b->nlive == 0 && b->next_job >= b->n) return;

    int running = 0;
    if (b->busy) curl_multi_perform(multi, &running);
    int left, ended = 0;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(multi, &left))) {
      if (msg->msg != CURLMSG_DONE) continue;
      live_call *lc = NULL;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&lc);
      CURLcode res = msg->data.result;
      if (lc && lc->s) end_attempt(b, lc, res);
      ended++;
    }
    if (ended) continue;  /* slots came free: fill them first */

    /* sleep until a transfer moves, the next retry is due, or a cancel */
    int timeout_ms = 1000;
    if (next_due >= 0 && b->busy < b->nslots) {
      double ms = ceil((next_due - lr_monotonic_now()) * 1000);
      if (ms < timeout_ms) timeout_ms = ms < 0 ? 0 : (int)ms;
    }
    struct curl_waitfd wake = { b->m->wake_fd, CURL_WAIT_POLLIN, 0 };
    curl_multi_poll(multi, &wake, 1, timeout_ms, NULL);
  }
}

luaretry_code luaretry_curl_perform_many(luaretry_curl_many *m, luaretry_policy *p,
                                         luaretry_curl_job *jobs, size_t n,
                                         const luaretry_curl_many_options *o) {
  if (!m || !p || (n && !jobs)) return LUARETRY_E_ARG;
  for (size_t i = 0; i < n; i++)
    if (!jobs[i].request || !jobs[i].request->url) return LUARETRY_E_ARG;
  luaretry_curl_many_options defaults;
  luaretry_curl_many_options_init(&defaults);
  if (!o) o = &defaults;
  luaretry_tuning t;
  luaretry_code rc = luaretry_policy_tuning(p, &t);
  if (rc != LUARETRY_OK) return rc;
  batch b;
  memset(&b, 0, sizeof b);
  b.m = m;
  b.p = p;
  b.jobs = jobs;
  b.n = n;
  b.o = o;
  b.deadline = t.deadline;
  luaretry_call_options_init(&b.copt);
  if (o->call) b.copt = *o->call;
  b.nslots = o->max_transfers ? o->max_transfers : 1;
  if (n && b.nslots > n) b.nslots = n;
  b.ncalls = o->max_calls ? o->max_calls : b.nslots * 2 > 1024 ? b.nslots * 2 : 1024;
  if (b.ncalls < b.nslots) b.ncalls = b.nslots;
  if (n && b.ncalls > n) b.ncalls = n;
  for (size_t i = 0; i < n; i++) {
    memset(&jobs[i].result, 0, sizeof jobs[i].result);
    jobs[i].result.code = LUARETRY_E_STATE;
  }
  if (n == 0) return LUARETRY_OK;
  b.slots = calloc(b.nslots, sizeof *b.slots);
  b.calls = calloc(b.ncalls, sizeof *b.calls);
  if (!b.slots || !b.calls) {
    free(b.slots);
    free(b.calls);
    return LUARETRY_E_NOMEM;
  }
  run_batch(&b);
  for (size_t k = 0; k < b.nslots; k++) attempt_free(&b.slots[k].a);
  free(b.slots);
  free(b.calls);
  return LUARETRY_OK;
}

/* ---- a transport for workflows: one attempt per request, no retry */

struct luaretry_curl_transport {
  CURL *h;
  luaretry_call *c;
  CURLM *m;
  transfer t;
};

luaretry_code luaretry_curl_transport_new(CURL *h, luaretry_call *c,
                                          luaretry_curl_transport **out) {
  if (!h || !out) return LUARETRY_E_ARG;
  luaretry_curl_transport *tr = calloc(1, sizeof *tr);
  if (!tr) return LUARETRY_E_NOMEM;
  tr->m = curl_multi_init();
  if (!tr->m) {
    free(tr);
    return LUARETRY_E_NOMEM;
  }
  tr->h = h;
  tr->c = c;
  *out = tr;
  return LUARETRY_OK;
}

void luaretry_curl_transport_free(luaretry_curl_transport *tr) {
  if (!tr) return;
  free(tr->t.body.data);
  free(tr->t.header_text.data);
  curl_multi_cleanup(tr->m);
  free(tr);
}

luaretry_code luaretry_curl_transport_perform(void *ud, const luaretry_request *req,
                                              double timeout, luaretry_response *resp) {
  luaretry_curl_transport *tr = ud;
  if (!tr || !req || !req->url || !resp) return LUARETRY_E_ARG;
  if (tr->c && luaretry_call_cancelled(tr->c)) return LUARETRY_E_CANCELLED;
  int failed = 0;
  struct curl_slist *headers = header_list(req, &failed);
  if (failed) {
    curl_slist_free_all(headers);
    return LUARETRY_E_NOMEM;
  }
  transfer *t = &tr->t;
  t->body.len = t->header_text.len = 0;
  t->body.failed = t->header_text.failed = 0;
  configure(tr->h, req, t, headers, timeout);
  CURLcode res = transfer_once(tr->m, tr->h, tr->c);
  curl_easy_setopt(tr->h, CURLOPT_HTTPHEADER, NULL);
  curl_slist_free_all(headers);
  if (t->body.failed || t->header_text.failed) return LUARETRY_E_NOMEM;
  if (res == CURLE_ABORTED_BY_CALLBACK) return LUARETRY_E_CANCELLED;
  index_headers(t);
  long status = 0;
  if (res == CURLE_OK) curl_easy_getinfo(tr->h, CURLINFO_RESPONSE_CODE, &status);
  resp->status = (int)status;
  resp->error = luaretry_curl_error_name(res);
  resp->body = t->body.data ? t->body.data : "";
  resp->body_len = t->body.len;
  resp->headers = t->headers;
  resp->header_count = t->header_count;
  return LUARETRY_OK;
}
