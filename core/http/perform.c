/* perform.c: one request performed under a policy until it stops:
 * luaretry_curl_perform.  Each attempt runs on a private multi handle so a
 * cancel interrupts the transfer at once. */
#include <math.h>
#include <string.h>

#include "http.h"

void lr_curl_connect_timeout(CURL *h, double connect, double timeout) {
  if (!(connect > 0) || (timeout > 0 && connect >= timeout)) return;
  long ms = (long)ceil(connect * 1000);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ms < 1 ? 1L : ms);
}

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
  CURLM *m = curl_multi_init();
  if (!m) return LUARETRY_E_NOMEM;
  attempt a;
  memset(&a, 0, sizeof a);
  luaretry_code rc = LUARETRY_OK;
  for (int n = 1;; n++) {
    double timeout = luaretry_call_timeout(c);
    rc = lr_curl_attempt_setup(c, req, n, h, timeout, &a);
    if (rc != LUARETRY_OK) break;
    if (o) lr_curl_connect_timeout(h, o->connect_timeout, timeout);
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
  curl_multi_cleanup(m);
  return rc;
}
