/* run_workflow.c: run POLICY [ARGS...] for a policy with run(http, args): the
 * script makes its own requests through the curl transport, and the call
 * retries the whole run; the last run's result is what the command prints.
 * Each request is a round of a call of its own (the transport's): paced by
 * the policy's rate, counted by its admission; with the policy's hedge, its
 * idempotent requests hedge, each told as "request N: attempt ...". */
#include "run.h"

typedef struct {
  luaretry_policy *p;
  const char *const *args;
  int nargs;
  luaretry_curl_transport *transport;
  const char *body; /* the last run's, valid until the next */
  size_t body_len;
  attempt_log request_log; /* the run's log, .request the request's number */
} workflow;

/* A luaretry_transport_fn: the request numbered within its run. */
static luaretry_code request(void *ud, const luaretry_request *req, double timeout,
                             luaretry_response *resp) {
  workflow *wf = ud;
  wf->request_log.request++;
  return luaretry_curl_transport_perform(wf->transport, req, timeout, resp);
}

/* A luaretry_operation_fn: one run of the script's run(). */
static luaretry_code attempt(void *ud, luaretry_call *c, int n, double timeout,
                             luaretry_outcome *o) {
  (void)c, (void)n;
  workflow *wf = ud;
  wf->request_log.request = 0;
  luaretry_code rc =
    luaretry_policy_run_workflow(wf->p, wf->args, wf->nargs, request, wf, timeout, o);
  if (rc == LUARETRY_OK) wf->body = o->body, wf->body_len = o->body_len;
  return rc;
}

luaretry_code workflow_run(const run_args *a, luaretry_policy *p, luaretry_call *c,
                           const attempt_log *log, outfile *out, luaretry_decision *final) {
  CURL *h = curl_easy_init();
  workflow wf = { p, (const char *const *)a->words, a->nwords, NULL, NULL, 0, *log };
  wf.request_log.target = NULL; /* the run's target is the policy's name */
  luaretry_code rc = h ? luaretry_curl_transport_new(h, c, &wf.transport) : LUARETRY_E_NOMEM;
  /* each request a round of a call of p's (paced, admitted, hedged as
   * the policy says: -i, -D and -w, which would forbid it, are refused) */
  if (rc == LUARETRY_OK)
    rc = luaretry_curl_transport_hedge(wf.transport, p, log_attempt, &wf.request_log);
  /* curl's options (TLS, -u, -A, -L) hold for every request of the script */
  if (rc == LUARETRY_OK && curlopts_apply(a, h) != 0) rc = LUARETRY_E_ARG;
  if (rc == LUARETRY_OK) rc = luaretry_call_run(c, attempt, &wf, final);
  /* no run returned when a request was refused before the first ended */
  if (rc == LUARETRY_OK && final->reason != LUARETRY_REASON_CANCELLED && wf.body)
    outfile_write(out, wf.body, wf.body_len);
  luaretry_curl_transport_free(wf.transport);
  curl_easy_cleanup(h);
  return rc;
}
