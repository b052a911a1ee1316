/* perform.c: one request performed under a policy until it stops:
 * luaretry_curl_perform.  Each attempt runs on the thread's multi handle,
 * so a cancel interrupts the transfer at once and connections are reused
 * from one call to the next. */
#include <string.h>

#include "http.h"

void luaretry_curl_options_init(luaretry_curl_options *o) {
  if (o) memset(o, 0, sizeof *o);
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
  int private_multi;
  CURLM *m = lr_curl_multi_take(&private_multi);
  if (!m) return LUARETRY_E_NOMEM;
  attempt a;
  memset(&a, 0, sizeof a);
  luaretry_code rc = LUARETRY_OK;
  for (int n = 1;; n++) {
    rc = lr_curl_attempt_setup(c, req, n, h, luaretry_call_timeout(c), &a);
    if (rc != LUARETRY_OK) break;
    CURLcode res = lr_curl_transfer_once(m, h, c);
    luaretry_outcome out;
    rc = lr_curl_attempt_finish(h, &a, res, &out);
    if (rc != LUARETRY_OK) break;
    rc = luaretry_call_report(c, &out, final);
    if (rc != LUARETRY_OK) break;
    if (!final->retry) {
      if (final->reason != LUARETRY_REASON_CANCELLED && o && o->sink && a.t.body.len)
        o->sink(o->sink_ud, a.t.body.data, a.t.body.len);
      break;
    }
    if (luaretry_call_wait(c, final->wait) == LUARETRY_E_CANCELLED) {
      luaretry_call_stop_cancelled(c, final);
      break;
    }
    rc = luaretry_call_next(c, final);  /* the breaker may have opened meanwhile */
    if (rc != LUARETRY_OK || !final->retry) break;
  }
  curl_easy_setopt(h, CURLOPT_READDATA, NULL);
  lr_curl_attempt_free(&a);
  lr_curl_multi_give(m, private_multi);
  return rc;
}
