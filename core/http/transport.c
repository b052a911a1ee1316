/* transport.c: a transport for workflows (luaretry_policy_run_workflow):
 * each http.* request of the script is one attempt on the host's handle,
 * with no retry of its own.  With a policy (luaretry_curl_transport_policy,
 * _hedge), each request is one round of a call of its own, on hedge.c's
 * path: it waits for its rate token and pacing slot, admission counts it,
 * and, when the policy hedges and the request is idempotent, hedges go
 * beside it while it is slow; the answer that ended the round is copied
 * for the script (a hedge's goes with the round).  A request the guards
 * refuse ends the workflow's call for that reason. */
#include <stdlib.h>
#include <string.h>

#include "http.h"

struct luaretry_curl_transport {
  CURL *h;
  luaretry_call *c;
  lr_transfer t; /* the last response, until the next */
  /* hedging (luaretry_curl_transport_hedge) */
  luaretry_policy *p;
  luaretry_observer_fn observer;
  void *observer_ud;
  int round_told; /* this round's decisions go to the observer */
  char *answer;   /* the round's answer, one block: headers, texts, body */
  luaretry_response kept;
  int answer_failed;
  int hedging; /* luaretry_curl_transport_hedge: requests may hedge */
};

luaretry_code luaretry_curl_transport_new(CURL *h, luaretry_call *c,
                                          luaretry_curl_transport **out) {
  if (!h || !out) return LUARETRY_E_ARG;
  luaretry_curl_transport *tr = calloc(1, sizeof *tr);
  if (!tr) return LUARETRY_E_NOMEM;
  tr->h = h;
  tr->c = c;
  *out = tr;
  return LUARETRY_OK;
}

luaretry_code luaretry_curl_transport_policy(luaretry_curl_transport *tr, luaretry_policy *p) {
  if (!tr) return LUARETRY_E_ARG;
  tr->p = p;
  tr->hedging = 0;
  return LUARETRY_OK;
}

luaretry_code luaretry_curl_transport_hedge(luaretry_curl_transport *tr, luaretry_policy *p,
                                            luaretry_observer_fn observer, void *ud) {
  if (!tr) return LUARETRY_E_ARG;
  tr->p = p;
  tr->hedging = 1;
  tr->observer = observer;
  tr->observer_ud = ud;
  return LUARETRY_OK;
}

void luaretry_curl_transport_free(luaretry_curl_transport *tr) {
  if (!tr) return;
  free(tr->answer);
  free(tr->t.body.data);
  free(tr->t.header_text.data);
  free(tr->t.headers);
  free(tr);
}

/* ---- a request under the policy: one round of a call of its own */

static size_t text_size(const char *s) { return s ? strlen(s) + 1 : 0; }

static const char *put_text(char **at, const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *d = memcpy(*at, s, n);
  *at += n;
  return d;
}

/* lr_io.landed: the round's answer, copied whole into one block. */
static void keep_answer(void *ud, const luaretry_outcome *o) {
  luaretry_curl_transport *tr = ud;
  size_t size =
    o->header_count * sizeof(luaretry_header) + text_size(o->error_detail) + o->body_len + 1;
  for (size_t i = 0; i < o->header_count; i++)
    size += text_size(o->headers[i].name) + text_size(o->headers[i].value);
  char *block = malloc(size);
  free(tr->answer);
  tr->answer = block;
  if (!block) {
    tr->answer_failed = 1;
    return;
  }
  luaretry_header *h = (luaretry_header *)block;
  char *at = block + o->header_count * sizeof(luaretry_header);
  for (size_t i = 0; i < o->header_count; i++) {
    h[i].name = put_text(&at, o->headers[i].name);
    h[i].value = put_text(&at, o->headers[i].value);
  }
  luaretry_response *k = &tr->kept;
  memset(k, 0, sizeof *k);
  k->error_detail = put_text(&at, o->error_detail);
  if (o->body_len) memcpy(at, o->body, o->body_len);
  at[o->body_len] = '\0';
  k->body = at;
  k->body_len = o->body_len;
  k->status = o->status;
  k->error = o->error; /* a name of the library's: static */
  k->headers = h;
  k->header_count = o->header_count;
}

/* The round's decisions go to the host's observer once a hedge is in
 * them: a request that answered alone says nothing, as before. */
static void tell(void *ud, const luaretry_outcome *o, const luaretry_decision *d) {
  luaretry_curl_transport *tr = ud;
  if (d->hedge || d->in_flight) tr->round_told = 1;
  if (tr->round_told && tr->observer) tr->observer(tr->observer_ud, o, d);
}

/* Whether req's round may hedge: the transport hedges, the policy has a
 * hedge, req is idempotent under it, and its breaker is closed (a
 * half-open one keeps its probes for calls). */
static int hedges(luaretry_curl_transport *tr, const luaretry_request *req) {
  char max[32];
  int idempotent = 0;
  luaretry_metrics m;
  return tr->hedging && luaretry_policy_get(tr->p, "hedge.max", max, sizeof max) == LUARETRY_OK &&
         strcmp(max, "none") != 0 &&
         luaretry_policy_is_idempotent(tr->p, req, &idempotent) == LUARETRY_OK && idempotent &&
         luaretry_policy_metrics(tr->p, &m) == LUARETRY_OK && m.breaker == LUARETRY_BREAKER_CLOSED;
}

/* The round's call asks the guards until its attempt may go: waits for its
 * rate token (on the workflow's call, so a cancel ends them at once).
 * LUARETRY_OK when it goes; a refusal ends the workflow's call for the
 * same reason (LUARETRY_E_OPERATION: the script's request fails). */
static luaretry_code admitted(luaretry_curl_transport *tr, luaretry_call *c) {
  luaretry_decision d;
  for (;;) {
    luaretry_code rc = luaretry_call_next(c, &d);
    if (rc != LUARETRY_OK) return rc;
    if (!d.retry) break;
    if (!(d.wait > 0)) return LUARETRY_OK;
    if (luaretry_call_wait(tr->c ? tr->c : c, d.wait) == LUARETRY_E_CANCELLED)
      return LUARETRY_E_CANCELLED;
  }
  if (d.reason == LUARETRY_REASON_CANCELLED) return LUARETRY_E_CANCELLED;
  luaretry_decision stop;
  if (tr->c) luaretry_call_stop_as(tr->c, &d, &stop);
  return LUARETRY_E_OPERATION;
}

/* req as one round of a call of the policy's: *resp the answer that ended
 * it. */
static luaretry_code as_call(luaretry_curl_transport *tr, const luaretry_request *req,
                             double timeout, luaretry_response *resp) {
  luaretry_call *c;
  luaretry_call_options one;
  luaretry_call_options_init(&one);
  /* the workflow's own call is counted; its deadline is the round's */
  one.flags = LUARETRY_CALL_WORKFLOW_REQUEST | (hedges(tr, req) ? 0 : LUARETRY_CALL_NO_HEDGE);
  double deadline = tr->c ? luaretry_call_deadline(tr->c) : 0;
  if (deadline > 0) {
    one.flags |= LUARETRY_CALL_DEADLINE;
    one.deadline = luaretry_clock_now() - luaretry_call_elapsed(tr->c) + deadline;
  }
  luaretry_code rc = luaretry_call_begin(tr->p, &one, &c);
  if (rc != LUARETRY_OK) return rc;
  int id;
  rc = admitted(tr, c);
  if (rc == LUARETRY_OK) rc = luaretry_call_start(c, &id);
  if (rc != LUARETRY_OK) {
    luaretry_call_free(c);
    return rc;
  }
  luaretry_call_on_decision(c, tell, tr);
  tr->round_told = 0;
  tr->answer_failed = 0;
  free(tr->answer);
  tr->answer = NULL;
  lr_io io;
  memset(&io, 0, sizeof io);
  io.body_limit = LUARETRY_CURL_TRANSPORT_MAX_BODY; /* the script gets it whole */
  io.limit_fails = 1;
  io.until = timeout > 0 ? lr_curl_now() + timeout : 0;
  io.parent = tr->c;
  io.landed = keep_answer;
  io.landed_ud = tr;
  luaretry_call_stall(c, &io.stall_timeout, &io.stall_speed);
  int private_multi, delivered;
  CURLM *m = lr_curl_multi_take(&private_multi);
  lr_http_attempt a;
  memset(&a, 0, sizeof a);
  luaretry_decision final;
  memset(&final, 0, sizeof final);
  rc = m ? lr_curl_hedged(c, tr->h, m, req, &io, &a, id, &delivered, &final) : LUARETRY_E_NOMEM;
  if (m) lr_curl_multi_give(m, private_multi);
  lr_curl_release(tr->h);
  lr_curl_attempt_free(&a);
  luaretry_call_free(c);
  if (rc != LUARETRY_OK) return rc;
  if (final.reason == LUARETRY_REASON_CANCELLED) return LUARETRY_E_CANCELLED;
  if (tr->answer_failed || !tr->answer) return LUARETRY_E_NOMEM;
  *resp = tr->kept;
  return LUARETRY_OK;
}

luaretry_code luaretry_curl_transport_perform(void *ud, const luaretry_request *req, double timeout,
                                              luaretry_response *resp) {
  luaretry_curl_transport *tr = ud;
  if (!tr || !req || !req->url || !resp) return LUARETRY_E_ARG;
  if (tr->c && luaretry_call_cancelled(tr->c)) return LUARETRY_E_CANCELLED;
  if (tr->p) return as_call(tr, req, timeout, resp);
  int failed = 0;
  struct curl_slist *headers = lr_curl_header_list(req, &failed);
  if (failed) {
    curl_slist_free_all(headers);
    return LUARETRY_E_NOMEM;
  }
  lr_transfer *t = &tr->t;
  /* the script gets the body whole, so it is bounded here instead */
  t->body_limit = LUARETRY_CURL_TRANSPORT_MAX_BODY;
  t->limit_fails = 1;
  t->stream = NULL;
  t->reader = NULL;
  luaretry_call_stall(tr->c, &t->stall_timeout, &t->stall_speed);
  lr_curl_configure(tr->h, req, t, headers, timeout);
  if (tr->c) lr_curl_connect_timeout(tr->h, luaretry_call_connect_timeout(tr->c), timeout);
  int private_multi;
  CURLM *m = lr_curl_multi_take(&private_multi);
  CURLcode res = m ? lr_curl_transfer_once(m, tr->h, tr->c) : CURLE_OUT_OF_MEMORY;
  if (m) lr_curl_multi_give(m, private_multi);
  lr_curl_release(tr->h);
  curl_slist_free_all(headers);
  if (t->body.failed || t->header_text.failed || lr_curl_index_headers(t) != 0)
    return LUARETRY_E_NOMEM;
  if (res == CURLE_ABORTED_BY_CALLBACK) return LUARETRY_E_CANCELLED;
  memset(resp, 0, sizeof *resp);
  lr_curl_failure(t, res, &resp->error, &resp->error_detail);
  long status = 0;
  if (!resp->error) curl_easy_getinfo(tr->h, CURLINFO_RESPONSE_CODE, &status);
  resp->status = (int)status;
  resp->body = t->body.data ? t->body.data : "";
  resp->body_len = t->body.len;
  resp->headers = t->headers;
  resp->header_count = t->header_count;
  return LUARETRY_OK;
}
