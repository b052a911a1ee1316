/* transport.c: a transport for workflows (luaretry_policy_run_workflow):
 * each http.* request of the script is one attempt on the host's handle,
 * with no retry of its own. */
#include <stdlib.h>
#include <string.h>

#include "http.h"

struct luaretry_curl_transport {
  CURL *h;
  luaretry_call *c;
  lr_transfer t; /* the last response, until the next */
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

void luaretry_curl_transport_free(luaretry_curl_transport *tr) {
  if (!tr) return;
  free(tr->t.body.data);
  free(tr->t.header_text.data);
  free(tr->t.headers);
  free(tr);
}

luaretry_code luaretry_curl_transport_perform(void *ud, const luaretry_request *req, double timeout,
                                              luaretry_response *resp) {
  luaretry_curl_transport *tr = ud;
  if (!tr || !req || !req->url || !resp) return LUARETRY_E_ARG;
  if (tr->c && luaretry_call_cancelled(tr->c)) return LUARETRY_E_CANCELLED;
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
