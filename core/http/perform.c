/* perform.c: one request performed under a policy until it stops:
 * luaretry_curl_perform.  Each attempt runs on the thread's multi handle,
 * so a cancel interrupts the transfer at once and connections are reused
 * from one call to the next. */
#include <string.h>

#include "http.h"

void luaretry_curl_options_init(luaretry_curl_options *o) {
  if (o) memset(o, 0, sizeof *o);
}

/* The host's options, with the policy's body_limit. */
static luaretry_code io_of(luaretry_policy *p, const luaretry_curl_options *o, lr_io *io) {
  luaretry_tuning t;
  luaretry_code rc = luaretry_policy_tuning(p, &t);
  if (rc != LUARETRY_OK) return rc;
  memset(io, 0, sizeof *io);
  io->body_limit = t.body_limit;
  io->stall_timeout = t.stall_timeout;
  io->stall_speed = t.stall_speed;
  if (o) {
    io->sink = o->sink;
    io->sink_ud = o->sink_ud;
    io->restart = o->restart;
    io->upload = o->upload;
    io->upload_ud = o->upload_ud;
  }
  return LUARETRY_OK;
}

/* luaretry_call_next until it says go at once (the rate limiter's token
 * may take waits) or stop; a cancel stops the call. */
static luaretry_code await_token(luaretry_call *c, luaretry_decision *d) {
  for (;;) {
    luaretry_code rc = luaretry_call_next(c, d);
    if (rc != LUARETRY_OK || !d->retry || !(d->wait > 0)) return rc;
    if (luaretry_call_wait(c, d->wait) == LUARETRY_E_CANCELLED) {
      luaretry_call_stop_cancelled(c, d);
      return LUARETRY_OK;
    }
  }
}

/* Attempts until the policy stops the call; the final body to the sink
 * when it was kept whole. */
static luaretry_code attempts(luaretry_call *c, CURL *h, CURLM *m, const luaretry_request *req,
                              const lr_io *io, lr_http_attempt *a, luaretry_decision *final) {
  for (;;) {
    int n, delivered = 0;
    luaretry_code rc = luaretry_call_start(c, &n);
    if (rc != LUARETRY_OK) return rc;
    if (luaretry_call_hedge_in(c) >= 0) { /* the policy hedges: hedge.c */
      rc = lr_curl_hedged(c, h, m, req, io, a, n, &delivered, final);
    } else {
      rc = lr_curl_attempt_setup(c, req, n, h, luaretry_call_timeout(c), io, a);
      if (rc != LUARETRY_OK) return rc;
      CURLcode res = lr_curl_transfer_once(m, h, c);
      luaretry_outcome out;
      rc = lr_curl_attempt_finish(h, a, res, &out);
      if (rc == LUARETRY_OK) rc = luaretry_call_report_attempt(c, n, &out, final);
    }
    if (rc != LUARETRY_OK) return rc;
    if (!final->retry) {
      char why[160];
      if (!delivered && lr_resume_end(&a->t, final) != 0)
        return luaretry_call_errmsg_set(c, LUARETRY_E_OPERATION,
                                        "the sink or restart refused the final body");
      /* the sink's "no" stops the call here too: its bytes went nowhere */
      if (!delivered && final->reason != LUARETRY_REASON_CANCELLED && !io->restart &&
          lr_curl_give_body(io->sink, NULL, io->sink_ud, a->t.body.data, a->t.body.len, why,
                            sizeof why) != 0)
        return luaretry_call_errmsg_set(c, LUARETRY_E_OPERATION, why);
      return LUARETRY_OK;
    }
    if (luaretry_call_wait(c, final->wait) == LUARETRY_E_CANCELLED) {
      luaretry_call_stop_cancelled(c, final);
      return LUARETRY_OK;
    }
    rc = await_token(c, final); /* the breaker may have opened meanwhile */
    if (rc != LUARETRY_OK || !final->retry) return rc;
  }
}

luaretry_code luaretry_curl_perform(luaretry_policy *p, luaretry_call *c, CURL *h,
                                    const luaretry_request *req, const luaretry_curl_options *o,
                                    luaretry_decision *final) {
  if (!p || !c || !h || !req || !req->url || !final) {
    const char *what = !p ? "p" : !h ? "h" : !req ? "req" : !req->url ? "req->url" : "final";
    char why[80];
    snprintf(why, sizeof why, "luaretry_curl_perform: %s is NULL", what);
    return luaretry_call_errmsg_set(c, LUARETRY_E_ARG, why); /* nothing said without a call */
  }
  memset(final, 0, sizeof *final);
  /* what no attempt can send is refused before the first: the policy
   * would retry a "protocol" failure that every attempt repeats */
  char why[300];
  luaretry_code rc = lr_curl_sendable(req, why, sizeof why);
  if (rc == LUARETRY_E_ARG) return luaretry_call_errmsg_set(c, rc, why);
  if (rc != LUARETRY_OK) return rc;
  lr_io io;
  rc = io_of(p, o, &io);
  if (rc != LUARETRY_OK) return rc;
  /* a call refused at begin (circuit open) never touches the network */
  rc = await_token(c, final);
  if (rc != LUARETRY_OK || !final->retry) return rc;
  lr_resume rs;
  if (lr_resume_init(&rs, o ? o->resume : NULL) != 0) return LUARETRY_E_ARG;
  int private_multi;
  CURLM *m = lr_curl_multi_take(&private_multi);
  if (!m) return LUARETRY_E_NOMEM;
  lr_http_attempt a;
  memset(&a, 0, sizeof a);
  io.resume = &rs;
  rc = attempts(c, h, m, req, &io, &a, final);
  lr_curl_release(h);
  lr_curl_attempt_free(&a);
  lr_resume_free(&rs);
  lr_curl_multi_give(m, private_multi);
  return rc;
}
