/* hedge.c: one round of a hedged call on the thread's multi handle: the
 * attempt on the host's handle, and while it has not answered after the
 * policy's hedge delay, hedges on copies of that handle (so the host's
 * TLS, proxy and auth options apply), all in flight at once.  The first
 * attempt the engine does not answer with "the others go on" decides: the
 * others are cancelled (their transfers removed; a connection cut mid
 * answer is closed, one that finished stays in the cache).  The attempt
 * on the host's handle streams to the sink as any attempt does; a hedge
 * keeps its body in memory, and when it wins the sink is restarted and
 * given that body whole: the loser's bytes never reach the output. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

#define SLOTS 11 /* the attempt and at most 10 hedges */

typedef struct {
  CURL *h;             /* the host's handle, or a hedge's copy */
  lr_http_attempt own; /* a hedge's attempt */
  lr_http_attempt *a;  /* the attempt's state: the caller's, or `own` */
  int id;
  int live;      /* in the multi handle */
  char *request; /* the attempt's own copy of what prepare() made */
} slot;

typedef struct {
  luaretry_call *c;
  CURLM *m;
  const luaretry_request *req;
  const lr_io *io;
  slot s[SLOTS];
  int n;
} round_t;

/* What prepare() makes lives in the call until its next prepare, so a
 * hedge's prepare would pull it from under the attempt in flight: each
 * attempt of a round keeps a copy of its own (see http.h). */
static size_t text_size(const char *s) { return s ? strlen(s) + 1 : 0; }

static char *put_text(char **at, const char *s) {
  if (!s) return NULL;
  char *d = *at;
  size_t n = strlen(s) + 1;
  memcpy(d, s, n);
  *at += n;
  return d;
}

int lr_curl_own_request(const luaretry_request *req, lr_http_attempt *a, char **block) {
  luaretry_request *r = &a->r;
  if (r->method == req->method && r->url == req->url && r->headers == req->headers &&
      r->body == req->body)
    return 0;
  size_t size = r->header_count * sizeof(luaretry_header) + text_size(r->method) +
                text_size(r->url) + (r->body ? r->body_len : 0);
  for (size_t i = 0; i < r->header_count; i++)
    size += text_size(r->headers[i].name) + text_size(r->headers[i].value);
  char *copy = malloc(size ? size : 1);
  if (!copy) return -1;
  luaretry_header *headers = (luaretry_header *)copy;
  char *at = copy + r->header_count * sizeof(luaretry_header);
  for (size_t i = 0; i < r->header_count; i++) {
    headers[i].name = put_text(&at, r->headers[i].name);
    headers[i].value = put_text(&at, r->headers[i].value);
  }
  r->headers = headers;
  r->method = put_text(&at, r->method);
  r->url = put_text(&at, r->url);
  if (r->body) {
    memcpy(at, r->body, r->body_len);
    if (a->t.upload == r->body) a->t.upload = at;
    r->body = at;
  }
  *block = copy;
  return 0;
}

/* Ends every transfer still running: cancelled, never reported. */
static void cancel_live(round_t *r) {
  for (int i = 0; i < r->n; i++) {
    slot *x = &r->s[i];
    if (!x->live) continue;
    curl_multi_remove_handle(r->m, x->h);
    curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(x->a->headers);
    x->a->headers = NULL;
    x->live = 0;
  }
}

static void free_hedges(round_t *r) {
  for (int i = 1; i < r->n; i++) {
    lr_curl_attempt_free(&r->s[i].own);
    curl_easy_cleanup(r->s[i].h);
    free(r->s[i].request);
  }
  r->n = 1;
  free(r->s[0].request); /* the next attempt on h prepares anew */
  r->s[0].request = NULL;
}

/* An attempt's timeout within what is left of io->until, when set (a
 * workflow's request shares its run's time). */
static double within(const lr_io *io, double timeout) {
  if (!(io->until > 0)) return timeout;
  double left = io->until - lr_curl_now();
  if (left < 0.001) left = 0.001; /* 0 would be no timeout at all */
  return timeout > 0 && timeout < left ? timeout : left;
}

/* A hedge: attempt `id` on a copy of the host's handle, its body kept
 * whole (no restart: the attempt on the host's handle owns the stream). */
static luaretry_code start_hedge(round_t *r, int id, double timeout) {
  if (r->n == SLOTS) return LUARETRY_E_STATE;
  slot *x = &r->s[r->n];
  memset(x, 0, sizeof *x);
  if (!(x->h = curl_easy_duphandle(r->s[0].h))) return LUARETRY_E_NOMEM;
  r->n++;
  x->a = &x->own;
  x->id = id;
  curl_easy_setopt(x->h, CURLOPT_VERBOSE, 0L); /* the host's trace is the attempt's */
  lr_io io = *r->io;
  io.restart = NULL;
  luaretry_code rc =
    lr_curl_attempt_setup(r->c, r->req, id, x->h, within(r->io, timeout), &io, x->a);
  if (rc != LUARETRY_OK) return rc;
  if (lr_curl_own_request(r->req, x->a, &x->request) != 0 ||
      curl_multi_add_handle(r->m, x->h) != CURLM_OK)
    return LUARETRY_E_NOMEM;
  x->live = 1;
  return LUARETRY_OK;
}

/* The winner's body to the sink: a hedge's replaces what the stream got.
 * 0, or -1 when the host refused it (restart or sink). */
static int deliver(round_t *r, slot *x, const luaretry_decision *final) {
  const lr_io *io = r->io;
  /* the attempt on h: an error answer to its Range request was set aside
   * (resume.c) and, ending the call, replaces the download in the sink */
  if (x == &r->s[0] && lr_resume_end(&x->a->t, final) != 0) {
    luaretry_call_errmsg_set(r->c, LUARETRY_E_OPERATION, x->a->t.detail);
    return -1;
  }
  if (final->reason == LUARETRY_REASON_CANCELLED || !io->sink) return 0;
  if (x == &r->s[0] && io->restart) return 0; /* streamed already */
  /* a deadline keeps the stream for a later call to resume, as a cancel
   * does: the host names those bytes by h's answer, never by a hedge's */
  if (io->restart && final->reason == LUARETRY_REASON_DEADLINE) return 0;
  char why[160];
  if (lr_curl_give_body(io->sink, io->restart, io->sink_ud, x->a->t.body.data, x->a->t.body.len,
                        why, sizeof why) == 0)
    return 0;
  luaretry_call_errmsg_set(r->c, LUARETRY_E_OPERATION, why);
  return -1;
}

/* An attempt ended: its report.  1 when the round is over (final set). */
static int landed(round_t *r, CURLMsg *msg, luaretry_code *rc, luaretry_decision *final) {
  slot *x = NULL;
  for (int i = 0; i < r->n && !x; i++)
    if (r->s[i].live && r->s[i].h == msg->easy_handle) x = &r->s[i];
  if (!x) return 0;
  curl_multi_remove_handle(r->m, x->h);
  x->live = 0;
  luaretry_outcome out;
  *rc = lr_curl_attempt_finish(x->h, x->a, msg->data.result, &out);
  if (*rc == LUARETRY_OK) *rc = luaretry_call_report_attempt(r->c, x->id, &out, final);
  if (*rc != LUARETRY_OK) return 1;
  if (!final->retry && final->reason == LUARETRY_REASON_NONE) return 0; /* others go on */
  cancel_live(r);
  if (!final->retry && deliver(r, x, final) != 0) *rc = LUARETRY_E_OPERATION;
  if (r->io->landed) r->io->landed(r->io->landed_ud, &out);
  return 1;
}

/* Asks for a hedge when one is due; the poll's timeout in ms otherwise. */
static int hedge_or_wait(round_t *r, luaretry_code *rc) {
  double in = luaretry_call_hedge_in(r->c);
  if (in != 0) return in < 0 || in > 1 ? 1000 : (int)ceil(in * 1000);
  luaretry_decision d;
  *rc = luaretry_call_hedge(r->c, r->req, &d);
  if (*rc == LUARETRY_OK && d.retry) *rc = start_hedge(r, d.attempt, d.next_timeout);
  return 0;
}

luaretry_code lr_curl_hedged(luaretry_call *c, CURL *h, CURLM *m, const luaretry_request *req,
                             const lr_io *io, lr_http_attempt *a, int id, int *delivered,
                             luaretry_decision *final) {
  round_t r;
  memset(&r, 0, sizeof r);
  r.c = c, r.m = m, r.req = req, r.io = io, r.n = 1;
  r.s[0] = (slot){ .h = h, .a = a, .id = id };
  *delivered = 1;
  luaretry_code rc =
    lr_curl_attempt_setup(c, req, id, h, within(io, luaretry_call_timeout(c)), io, a);
  if (rc != LUARETRY_OK) return rc;
  if (lr_curl_own_request(req, a, &r.s[0].request) != 0 ||
      curl_multi_add_handle(m, h) != CURLM_OK) {
    free_hedges(&r);
    return LUARETRY_E_NOMEM;
  }
  r.s[0].live = 1;
  /* the call's cancel, and its parent's (a workflow's run) */
  struct curl_waitfd wake[2];
  int nwake = 0, fds[2] = { luaretry_call_wakeup_fd(c),
                            io->parent ? luaretry_call_wakeup_fd(io->parent) : -1 };
  for (int i = 0; i < 2; i++)
    if (fds[i] >= 0) wake[nwake++] = (struct curl_waitfd){ fds[i], CURL_WAIT_POLLIN, 0 };
  for (;;) {
    int running = 0, left;
    CURLMsg *msg;
    if (curl_multi_perform(m, &running) != CURLM_OK) {
      rc = LUARETRY_E_NOMEM;
      break;
    }
    int over = 0;
    while (!over && (msg = curl_multi_info_read(m, &left)))
      if (msg->msg == CURLMSG_DONE) over = landed(&r, msg, &rc, final);
    if (over) break;
    if (io->parent && luaretry_call_cancelled(io->parent)) luaretry_call_cancel(c);
    if (luaretry_call_cancelled(c)) { /* reported as cut short: the call stops */
      CURLMsg cut = { CURLMSG_DONE,
                      r.s[0].live ? h : NULL,
                      { .result = CURLE_ABORTED_BY_CALLBACK } };
      for (int i = 0; i < r.n && !cut.easy_handle; i++)
        if (r.s[i].live) cut.easy_handle = r.s[i].h;
      if (cut.easy_handle && landed(&r, &cut, &rc, final)) break;
    }
    int ms = hedge_or_wait(&r, &rc);
    if (rc != LUARETRY_OK) break;
    if (ms == 0) continue;
    curl_multi_poll(m, nwake ? wake : NULL, (unsigned)nwake, ms, NULL);
  }
  cancel_live(&r);
  free_hedges(&r);
  return rc;
}
