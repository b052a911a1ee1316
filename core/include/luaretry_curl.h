/* luaretry_curl.h: perform a libcurl easy handle under a policy.  Kept out
 * of luaretry.h so that hosts without curl never see curl.h. */
#ifndef LUARETRY_CURL_H
#define LUARETRY_CURL_H

#include <curl/curl.h>

#include "luaretry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Receives the body of the final attempt (never a retried one's). */
typedef size_t (*luaretry_sink_fn)(void *ud, const char *data, size_t len);
/* (Each attempt's decision reaches luaretry_call_observe()'s observer.) */
typedef struct {
  luaretry_sink_fn sink;
  void *sink_ud;
  double connect_timeout;      /* seconds for the connection of each attempt
                                  (curl's --connect-timeout); never more than
                                  the attempt's timeout; 0: the attempt's */
  uint64_t reserved[3];
} luaretry_curl_options;

/* Sets every field to its empty value (or use a designated initializer). */
LUARETRY_API void luaretry_curl_options_init(luaretry_curl_options *o);

/*
 * Performs `req` on handle `h` as call `c` of policy `p` until the policy
 * stops it.  Sets on h, for each attempt: URL, method, headers, the body
 * (sent whole again on every attempt), timeouts clipped to the deadline
 * (the connection's: o->connect_timeout when shorter),
 * and its own write/header/read/seek callbacks; other options the host set
 * (TLS, proxy, auth...) are kept.  Returns LUARETRY_OK when a decision
 * was reached (see final->reason), or an error code with
 * luaretry_call_errmsg(c) / luaretry_policy_errmsg(p).
 * luaretry_call_cancel(c) interrupts a transfer as well as a wait.
 */
LUARETRY_API luaretry_code luaretry_curl_perform(luaretry_policy *p, luaretry_call *c, CURL *h,
                                    const luaretry_request *req,
                                    const luaretry_curl_options *o,
                                    luaretry_decision *final);

/* ------------------------------------------------------------ batches
 *
 * Many requests, each its own retried call of one policy (so all share
 * its budget, breaker and counters), at most `max_transfers` transfers at
 * once through ONE libcurl multi handle, driven by one loop in the calling
 * thread.  Attempts of different calls overlap; a call waiting for its
 * backoff holds no transfer slot (its next attempt is scheduled at
 * now + wait; the loop polls until the next scheduled attempt).  Each
 * attempt is made exactly as luaretry_curl_perform() makes it: prepare,
 * is_idempotent, headers, timeouts clipped to the deadline, Retry-After,
 * the body sent whole.
 *
 *   luaretry_curl_many *m;
 *   luaretry_curl_many_new(&m);            // keep it where a signal handler
 *   luaretry_curl_job jobs[n] = { ... };   // can reach it
 *   luaretry_curl_many_options o;
 *   luaretry_curl_many_options_init(&o);
 *   o.max_transfers = 8;
 *   luaretry_curl_perform_many(m, p, jobs, n, &o);
 *   // jobs[i].result.final.reason: success, final, exhausted, ...
 *   luaretry_curl_many_free(m);
 *
 * Calls begin lazily, when their first attempt can start (a call queued
 * behind others does not spend its deadline waiting for a slot; one begun
 * while the circuit is open is refused at once, and never reaches the
 * network), in the order of `jobs`; due retries go before new calls.
 * Before each retry luaretry_call_next() is asked again.
 */
typedef struct luaretry_curl_many luaretry_curl_many;

/* One handle may run many batches one after the other (it keeps the multi
 * handle, and with it the connection cache).  Not for two threads at once. */
LUARETRY_API luaretry_code luaretry_curl_many_new(luaretry_curl_many **out);
LUARETRY_API void luaretry_curl_many_free(luaretry_curl_many *m);

/* Cancels the run in progress on `m` and every later one: calls waiting or
 * in a transfer stop as cancelled, calls not begun yet are not begun
 * (reason CANCELLED, attempt 0), and luaretry_curl_perform_many() returns
 * within milliseconds.  Any thread, or a signal handler: async-signal-safe
 * (an atomic store and a write(2) to an eventfd). */
LUARETRY_API void luaretry_curl_many_cancel(luaretry_curl_many *m);
LUARETRY_API int luaretry_curl_many_cancelled(const luaretry_curl_many *m);

/* The multi handle, for options such as CURLMOPT_MAX_HOST_CONNECTIONS. */
LUARETRY_API CURLM *luaretry_curl_many_multi(luaretry_curl_many *m);

/* What became of a job; in jobs[i].result once the run returns (and
 * passed to `done` as soon as the call ends). */
typedef struct {
  luaretry_code code;        /* LUARETRY_OK: `final` is the call's decision;
                                else why none was reached (out of memory, a
                                prepare or is_idempotent that failed) */
  luaretry_decision final;   /* final.attempt: attempts made (0: none, e.g.
                                circuit_open at begin, or cancelled first);
                                final.message only valid inside `done` */
  int status;                /* HTTP status of the last attempt; 0: none */
  const char *error;         /* its transport failure name, or NULL */
  double elapsed;            /* seconds from the call's begin to its end */
  const char *errmsg;        /* code != LUARETRY_OK: the detail; only valid
                                inside `done` (NULL afterwards) */
  uint64_t reserved[4];
} luaretry_curl_result;

typedef struct {
  const luaretry_request *request; /* method, URL, headers, body: not copied,
                                      valid until the run returns */
  luaretry_sink_fn sink;           /* the final attempt's body, or NULL (not
                                      called when the call was cancelled) */
  void *sink_ud;
  luaretry_observer_fn observer;   /* every decision of this job's call */
  void *observer_ud;
  luaretry_curl_result result;     /* out */
  uint64_t reserved[4];
} luaretry_curl_job;

/* Called once per job, as soon as its call ends (in completion order). */
typedef void (*luaretry_curl_done_fn)(void *ud, size_t index, const luaretry_curl_job *job);

typedef struct {
  size_t max_transfers;      /* transfers at once; 0 counts as 1 */
  size_t max_calls;          /* calls in progress at once, transfers and
                                waits together (each holds one of the
                                policy's Lua states); 0: the larger of 1024
                                and 2 * max_transfers */
  CURL *easy;                /* a template: each call's handle is a
                                curl_easy_duphandle() of it, so options the
                                host set (TLS, proxy, auth) apply; NULL:
                                curl_easy_init() */
  const luaretry_call_options *call; /* for every call, or NULL; with
                                LUARETRY_CALL_SEED, job i gets seed + i.
                                LUARETRY_CALL_VIRTUAL_TIME: waits take no
                                time */
  luaretry_curl_done_fn done;  /* or NULL */
  void *done_ud;
  double connect_timeout;      /* as in luaretry_curl_options */
  uint64_t reserved[3];
} luaretry_curl_many_options;

LUARETRY_API void luaretry_curl_many_options_init(luaretry_curl_many_options *o);

/*
 * Runs the n jobs until every call has ended (or the run is cancelled)
 * and fills each job's result.  Returns LUARETRY_OK when every job has a
 * result, even a cancelled or failed one (see jobs[i].result); an error
 * code (LUARETRY_E_ARG, LUARETRY_E_NOMEM, LUARETRY_E_SYSTEM) only when
 * the run could not start, and then no job was begun.  Never prints.
 */
LUARETRY_API luaretry_code luaretry_curl_perform_many(luaretry_curl_many *m, luaretry_policy *p,
                                         luaretry_curl_job *jobs, size_t n,
                                         const luaretry_curl_many_options *o);

/* A transport for luaretry_policy_run_workflow(): each http.* request of
 * the script is one attempt on `h`; `c` (may be NULL) cancels transfers.
 * Pass luaretry_curl_transport_perform as the transport, the handle as ud. */
typedef struct luaretry_curl_transport luaretry_curl_transport;
LUARETRY_API luaretry_code luaretry_curl_transport_new(CURL *h, luaretry_call *c,
                                          luaretry_curl_transport **out);
LUARETRY_API void luaretry_curl_transport_free(luaretry_curl_transport *t);
LUARETRY_API luaretry_code luaretry_curl_transport_perform(void *t, const luaretry_request *req,
                                              double timeout, luaretry_response *resp);

/* The transport failure name of a curl result: "connect", "timeout",
 * "reset", "dns", "tls", "truncated", "protocol", "transport"; NULL for
 * CURLE_OK. */
LUARETRY_API const char *luaretry_curl_error_name(CURLcode rc);

/* Whether a transfer that ended with rc provably never left this machine
 * (no connection was made): such a request may always be sent again,
 * idempotent or not.  What the curl helper uses for not_repeatable. */
LUARETRY_API int luaretry_curl_never_sent(CURLcode rc);

#ifdef __cplusplus
}
#endif
#endif
