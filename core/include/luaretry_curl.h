/* luaretry_curl.h: perform a libcurl easy handle under a policy.  Kept out
 * of luaretry.h so that hosts without curl never see curl.h. */
#ifndef LUARETRY_CURL_H
#define LUARETRY_CURL_H

#include <curl/curl.h>

#include "luaretry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Receives a response body: the final attempt's once the call has stopped,
 * or, with a restart function, every attempt's bytes as they arrive.  Return
 * len; any other value stops the call (LUARETRY_E_OPERATION), whichever way
 * the body came: streamed, given whole, or a winning hedge's (the decision
 * in `final` stands, but its body went nowhere). */
typedef size_t (*luaretry_sink_fn)(void *ud, const char *data, size_t len);
/* Streaming: an attempt begins, so what the sink received of the one
 * before is to be forgotten (rewind the file, drop the spool).  Called
 * with the sink's ud before every attempt; 0, or -1 to stop the call
 * (LUARETRY_E_OPERATION). */
typedef int (*luaretry_restart_fn)(void *ud);
/* The request body, read from the host as it is sent: up to len bytes at
 * `offset` into buf.  Returns how many it gave (at least 1), or 0 when it
 * cannot (the source changed size or failed): the call stops
 * (LUARETRY_E_OPERATION; the host knows why).  Offsets may go back: curl
 * rewinds for a redirect or a new attempt. */
typedef size_t (*luaretry_upload_fn)(void *ud, uint64_t offset, char *buf, size_t len);

/*
 * Resuming a download (curl's issues #1084 and #18035).  With `resume` set
 * on a streamed GET (a restart function is needed), an attempt that ends
 * early (a transport failure: reset, truncated, timeout, stalled) after a
 * 200 or 206 that carried "Accept-Ranges: bytes" and a strong ETag (else a
 * Last-Modified), and no Content-Encoding (libcurl may have decoded it: a
 * Range counts the encoded bytes), leaves what the sink got in place: the
 * next attempt asks
 * "Range: bytes=N-" with "If-Range: <that validator>" and restart() is not
 * called.  Its answer is appended only when it is a 206 whose Content-Range
 * starts at N, with the same total length and the same validator.  A 200
 * (the resource changed, or the server ignores Range) calls restart() at
 * its first byte and is written from zero; a 206 that does not match
 * calls restart() too and the attempt fails as "range" (a 206 that does
 * not fit is never written), so the next attempt starts from zero: two
 * versions are never spliced.  An error answer (4xx or 5xx but 416: a load
 * balancer's 503) says nothing of the resource: its body goes to the
 * script, never to the sink, which keeps its bytes (restart() is not
 * called, so a host must not drop them either), and the next attempt asks
 * for the same range.  Any other answer (a 416, a 3xx not followed) calls
 * restart() and is written from zero.  Each restart of a download that
 * had bytes is told to `note` with the reason.
 * `offset`: bytes the sink holds before the call (curl's -C -, a partial
 * file): the first attempt asks for the rest, with If-Range: `validator`
 * when set, and a 200 starts over.
 * Resuming changes nothing else: every attempt counts towards
 * max_attempts, and the deadline bounds the call as ever.
 * Digests: a complete 2xx answer whose server states a digest of what it
 * sent (RFC 9530 Repr-Digest or Content-Digest with sha-256 or sha-512,
 * Content-MD5, x-goog-hash with crc32c or md5) is checked against the
 * bytes that came, a resumed download as a whole (its Repr-Digest or
 * x-goog-hash against every byte from zero, its Content-Digest against
 * the part); an answer with a Content-Encoding is not checked (curl may
 * decode it).  A mismatch fails the attempt as "digest_mismatch" (the
 * bytes were damaged on the way: transient) and the next attempt starts
 * from zero.  `checksum` is the host's own digest of the whole body: the
 * first answer that does not match it fails as "digest_mismatch", the
 * next as "checksum_mismatch" (final in the default classifier and the
 * http policy: the server serves something else).  A checksum that is not
 * one: LUARETRY_E_ARG.  With `offset` the bytes held before the call are
 * hashed only when `held` reads them; otherwise only a Content-Digest of
 * the rest is checked, and the host's checksum is not.
 */
typedef struct {
  uint64_t offset;      /* bytes the sink holds already (-C -) */
  luaretry_log_fn note; /* "restarting from zero: why", or NULL */
  void *note_ud;
  const char *checksum;    /* "sha-256=HEX" (sha-512, md5): the whole body's
                           digest as the host knows it, or NULL (see above) */
  const char *validator;   /* with offset: the strong ETag or Last-Modified
                            of the bytes held (an earlier run's), sent as
                            If-Range; NULL: none (curl's -C -) */
  luaretry_upload_fn held; /* with offset: reads the bytes held (given the
                              sink's ud) so that digests and checksum cover
                              them; NULL: they are not hashed */
  uint64_t reserved[1];
} luaretry_curl_resume;

/* Whether an attempt's outcome leaves a download that the next attempt can
 * resume (the conditions above; the request must have been a GET). */
LUARETRY_API int luaretry_curl_resumable(const luaretry_outcome *o);

/*
 * Where bodies go.  Memory stays bounded when bodies are large:
 * - Responses: each attempt keeps at most the policy's body_limit bytes
 *   for the script.  With `restart` set, `sink` receives every attempt's
 *   body as it arrives (restart() first, before each attempt), so the
 *   host writes it where it goes and keeps or drops it by the final
 *   decision; a body of any length costs body_limit bytes.  Without
 *   `restart`, the final attempt's body is given to `sink` whole once the
 *   call stops, so every attempt's body is kept in memory until then.
 * - Uploads: with `upload` set, the request's `body` need only hold its
 *   first body_limit bytes (what is_idempotent and prepare see) and
 *   `body_len` is the whole length; the bytes sent are read through
 *   `upload` on every attempt.  `body` NULL with a `body_len` above 0,
 *   with `upload` or without, is refused (LUARETRY_E_ARG).  A prepare() that replaces the body sends
 *   its own, from memory.
 * (Each attempt's decision reaches luaretry_call_on_decision()'s observer.)
 */
typedef struct {
  luaretry_sink_fn sink;
  void *sink_ud;               /* also restart's */
  luaretry_restart_fn restart; /* set: stream every attempt's body to sink */
  luaretry_upload_fn upload;   /* set: the request body's bytes come from here */
  void *upload_ud;
  const luaretry_curl_resume *resume; /* set: a GET that ends early is
                                   resumed (see above); valid until return */
  uint64_t reserved[4];
} luaretry_curl_options;

/* The most bytes of response headers the helper keeps for one response
 * (names and values); more is a "protocol" failure, not memory. */
#define LUARETRY_CURL_MAX_HEADER_BYTES (256 * 1024)

/* Sets every field to its empty value (or use a designated initializer). */
LUARETRY_API void luaretry_curl_options_init(luaretry_curl_options *o);

/*
 * Performs `req` on handle `h` as call `c` of policy `p` until the policy
 * stops it.  Sets on h, for each attempt: URL, method, headers, the body
 * (sent whole again on every attempt, and on a redirect: a body with a
 * method other than POST sets CURLOPT_POSTREDIR to CURL_REDIR_POST_ALL,
 * since libcurl would send a PUT without it), timeouts clipped to the
 * deadline,
 * the protocols (http and https only, redirects included: no other scheme
 * is reachable), an error buffer, and its own write/header/read/seek
 * callbacks (unset again before it returns); other options the host set
 * (TLS, proxy, auth, redirects...) are kept.  A request no attempt could
 * send as it means is refused before the first (LUARETRY_E_ARG): a URL
 * that is not http or https as libcurl reads it (a URL without a scheme
 * is http://, as curl guesses); a method or a header name that is not
 * RFC 9110's token, a header value with a CR or LF (either would split
 * the request: prepare() holds a script to the same rules); a body_len
 * with no body (see "Where bodies go").  A
 * response's headers are kept up to LUARETRY_CURL_MAX_HEADER_BYTES: a
 * longer head fails the attempt as a "protocol" error.  Returns
 * LUARETRY_OK when a decision was reached (see final->reason), or an
 * error code with luaretry_call_errmsg(c) / luaretry_policy_errmsg(p)
 * saying why (the helper's own refusals too: LUARETRY_E_ARG before an
 * attempt, LUARETRY_E_OPERATION when the host's sink or restart refused
 * the final body).
 * luaretry_call_cancel(c) interrupts a transfer as well as a wait.
 * With the policy's hedge (luaretry.h), an attempt that has not answered
 * after hedge.delay gets hedges on copies of h (curl_easy_duphandle: the
 * host's options apply), on the same multi handle; the first acceptable
 * answer wins, the others are cancelled.  The attempt on h streams to the
 * sink as ever; a hedge keeps its body in memory and, when it wins, the
 * sink is restarted (restart) and given that body whole.  A call that
 * ends by its deadline or a cancel leaves a streaming sink as the attempt
 * on h left it (h's answer names those bytes, for a later call to
 * resume): a hedge cut with it gives nothing.
 */
LUARETRY_API luaretry_code luaretry_curl_perform(luaretry_policy *p, luaretry_call *c, CURL *h,
                                                 const luaretry_request *req,
                                                 const luaretry_curl_options *o,
                                                 luaretry_decision *final);

/* Connections outlive calls: each thread that calls luaretry_curl_perform()
 * keeps one libcurl multi handle, and with it a cache of keep-alive
 * connections, so sequential calls to one server (one easy handle, or a new
 * one each time) share a connection; it is freed when the thread exits.  A
 * call made from inside another (a callback) gets a multi handle of its own
 * for that call.  A fork's child never uses the connections its parent's
 * thread kept: its first call makes a multi handle of its own, and the
 * inherited one is left as it is (not closed: its sockets are the
 * parent's too), so the child holds its copies of them until it exits.  A host with its own cache hands it in on the easy handle:
 * CURLOPT_SHARE with a CURLSH sharing CURL_LOCK_DATA_CONNECT (with lock
 * functions when threads share it); the calls then use that cache. */

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
 * A policy with a hedge hedges here too (as luaretry_curl_perform does):
 * a hedge takes a free transfer slot, after due retries and before new
 * calls, so with max_transfers no larger than the jobs that keep it busy
 * none goes; a hedging policy's batch may use max_transfers beyond n.
 * Before each retry luaretry_call_next() is asked again.
 * A job whose request luaretry_curl_perform() would refuse (LUARETRY_E_ARG:
 * a scheme not http or https, a header that would split it...) ends at
 * once, never begun, its result.errmsg saying why; the other jobs go on.
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

/* The descriptor a job source (luaretry_curl_many_options.next) reads
 * from, such as a pipe of URLs: while `next` says it has no job yet (-1),
 * the run also waits for it to be readable, and then asks `next` again.
 * -1: none (the default); `next` is then asked again when the run wakes
 * for its transfers, and at least once a second.  LUARETRY_E_ARG for a
 * NULL `m` or an fd below -1. */
LUARETRY_API luaretry_code luaretry_curl_many_next_fd(luaretry_curl_many *m, int fd);

/* What became of a job; in jobs[i].result once the run returns (and
 * passed to `done` as soon as the call ends). */
typedef struct {
  luaretry_code code;      /* LUARETRY_OK: `final` is the call's decision;
                                else why none was reached (out of memory, a
                                prepare or is_idempotent that failed, a
                                request refused: LUARETRY_E_ARG), or
                                LUARETRY_E_OPERATION: the sink, restart or
                                upload refused (after a decision, `final`
                                holds it) */
  luaretry_decision final; /* final.attempt: attempts made (0: none, e.g.
                                circuit_open at begin, or cancelled first);
                                final.message only valid inside `done` */
  int status;              /* HTTP status of the last attempt; 0: none */
  const char *error;       /* its transport failure name, or NULL */
  double elapsed;          /* seconds from the call's begin to its end */
  const char *errmsg;      /* code != LUARETRY_OK: the detail; only valid
                                inside `done` (NULL afterwards) */
  uint64_t reserved[4];
} luaretry_curl_result;

typedef struct {
  const luaretry_request *request; /* method, URL, headers, body: not copied,
                                      valid until the run returns */
  luaretry_sink_fn sink;           /* the final attempt's body, or NULL (not
                                      called when the call was cancelled) */
  void *sink_ud;
  luaretry_observer_fn observer; /* every decision of this job's call */
  void *observer_ud;
  luaretry_curl_result result; /* out */
  luaretry_restart_fn restart; /* as in luaretry_curl_options: set, the
                                      sink gets every attempt's body as it
                                      arrives (restart first, sink_ud) */
  luaretry_upload_fn upload;   /* as in luaretry_curl_options */
  void *upload_ud;
  const luaretry_curl_resume *resume; /* as in luaretry_curl_options */
  const luaretry_call_options *call;  /* this job's call: its own deadline
                                         (LUARETRY_CALL_DEADLINE), seed...;
                                         NULL: the run's (many_options.call);
                                         the run's LUARETRY_CALL_VIRTUAL_TIME
                                         holds for every job */
  uint64_t max_body;                  /* with restart: an attempt whose body passes this
                        many bytes fails as "too_large" (reported, judged
                        by the policy), as libcurl's CURLOPT_MAXFILESIZE
                        fails one whose stated length does; the bytes past
                        it never reach the sink, and a next attempt starts
                        from zero (never resumed).  0: no limit */
  uint64_t reserved[7];               /* jobs are an array: its stride never changes, new
                           fields take this room */
} luaretry_curl_job;

/* Called once per job, as soon as its call ends (in completion order). */
typedef void (*luaretry_curl_done_fn)(void *ud, size_t index, const luaretry_curl_job *job);

/* A job source, for a run whose jobs are made as they are needed (a list
 * read as it goes): fills *job (zeroed, its `result` ignored) for job
 * number `index` and returns 1; returns 0 when there are no more, or -1
 * when there is none yet (a pipe whose writer has not written the next
 * line): the run's calls go on meanwhile, and `next` is asked again when
 * the descriptor of luaretry_curl_many_next_fd() is readable (see there).
 * A source that would wait for its input instead holds every transfer of
 * the run while it waits.  The job is the library's copy; what its
 * pointers reach (the request, the sink's ud...) must stay valid until
 * `done` has been called for it. */
typedef int (*luaretry_curl_next_fn)(void *ud, size_t index, luaretry_curl_job *job);

/* The default of max_calls. */
#define LUARETRY_CURL_MAX_CALLS 4096

typedef struct {
  size_t max_transfers;              /* transfers at once; 0 counts as 1 */
  size_t max_calls;                  /* calls in progress at once, transfers and
                                waits together; 0: the larger of
                                LUARETRY_CURL_MAX_CALLS and 2 * max_transfers.
                                A call waiting for its retry holds no
                                transfer and no easy handle, only about a
                                kilobyte; the bound keeps a long outage from
                                beginning every job of a large run. */
  CURL *easy;                        /* a template: each attempt's handle is a
                                curl_easy_duphandle() of it, so options the
                                host set (TLS, proxy, auth) apply; NULL:
                                curl_easy_init() */
  const luaretry_call_options *call; /* for every call, or NULL; with
                                LUARETRY_CALL_SEED, job i gets seed + i.
                                LUARETRY_CALL_VIRTUAL_TIME: waits take no
                                time */
  luaretry_curl_done_fn done;        /* or NULL; with `next`, where results go */
  void *done_ud;
  luaretry_curl_next_fn next; /* set: jobs come from here, as calls can
                                begin, and perform_many's jobs and n are
                                NULL and 0; the memory of a run stays flat
                                however many jobs there are.  A cancel asks
                                for no more. */
  void *next_ud;
  CURLSH *share; /* or NULL: set (CURLOPT_SHARE) on every
                                attempt's handle, which curl_easy_duphandle()
                                does not carry over: a cookie store the
                                calls share, say.  Used by this thread only */
  uint64_t reserved[1];
} luaretry_curl_many_options;

LUARETRY_API void luaretry_curl_many_options_init(luaretry_curl_many_options *o);

/*
 * Runs the n jobs (or those o->next gives) until every call has ended or
 * the run is cancelled, and fills each job's result (with o->next: each
 * result reaches o->done only).  Returns LUARETRY_OK when every job has a
 * result, even a cancelled or failed one (see jobs[i].result); an error
 * code (LUARETRY_E_ARG, LUARETRY_E_NOMEM, LUARETRY_E_SYSTEM) only when
 * the run could not start, and then no job was begun.  Never prints.
 */
LUARETRY_API luaretry_code luaretry_curl_perform_many(luaretry_curl_many *m, luaretry_policy *p,
                                                      luaretry_curl_job *jobs, size_t n,
                                                      const luaretry_curl_many_options *o);

/* A transport for luaretry_policy_run_workflow(): each http.* request of
 * the script is one attempt on `h`; `c` (may be NULL) cancels transfers.
 * A response body is kept whole for the script, up to
 * LUARETRY_CURL_TRANSPORT_MAX_BODY bytes: a longer one fails the request
 * ("transport", with error_detail saying so), so an endless body cannot
 * take the host's memory.
 * Pass luaretry_curl_transport_perform as the transport, the handle as ud. */
#define LUARETRY_CURL_TRANSPORT_MAX_BODY (16 * 1024 * 1024)
typedef struct luaretry_curl_transport luaretry_curl_transport;
LUARETRY_API luaretry_code luaretry_curl_transport_new(CURL *h, luaretry_call *c,
                                                       luaretry_curl_transport **out);
LUARETRY_API void luaretry_curl_transport_free(luaretry_curl_transport *t);
LUARETRY_API luaretry_code luaretry_curl_transport_perform(void *t, const luaretry_request *req,
                                                           double timeout, luaretry_response *resp);
/* Each request of the workflow one round of a call of `p` (the workflow's
 * policy) of its own, flagged LUARETRY_CALL_WORKFLOW_REQUEST and never
 * hedged: it waits for its rate-limiter token and header-pacing slot (the
 * wait ended at once by cancelling the transport's call), is counted by
 * admission when sent and records its answer in the rate and admission;
 * max_attempts, the budget and the breaker count the workflow's rounds.
 * Begin the workflow's call (the transport's `c`) with
 * LUARETRY_CALL_WORKFLOW, so its rounds are not paced besides.  A request
 * the guards refuse (admission, a token past the deadline) is not sent: c
 * stops for that reason (luaretry_call_stop_as) and the script's request
 * fails with LUARETRY_E_OPERATION.  p = NULL: requests go as they come (the
 * default). */
LUARETRY_API luaretry_code luaretry_curl_transport_policy(luaretry_curl_transport *t,
                                                          luaretry_policy *p);
/* Hedged requests in a workflow: luaretry_curl_transport_policy, and with `p` set, a
 * request that is idempotent under p (is_idempotent, else the method rule:
 * never a POST without it), while p has a hedge and its breaker is closed,
 * runs as luaretry_curl_perform's attempts do: hedges on copies of the
 * handle beside a slow attempt, the first acceptable answer winning, the
 * others cancelled.  Its round (a hedge pays no budget token (failures
 * do); hedges sent, won and cancelled in p's metrics) is never retried:
 * the workflow retries as a whole.  The script gets the answer that ended the round, whole (a loser's
 * bytes never), judged or not.  `observer` (or NULL) gets the decisions of
 * each round in which a hedge went.  p = NULL: no hedging (the default). */
LUARETRY_API luaretry_code luaretry_curl_transport_hedge(luaretry_curl_transport *t,
                                                         luaretry_policy *p,
                                                         luaretry_observer_fn observer, void *ud);

/* The transport failure name of a curl result: "connect", "timeout",
 * "reset", "dns", "tls", "tls_verify" (a certificate or host name that does
 * not verify, a pinned key that does not match: final under the default
 * rule), "too_many_redirects" (CURLOPT_MAXREDIRS reached: final under the
 * default rule too), "too_large" (CURLOPT_MAXFILESIZE exceeded: final under
 * the default rule too), "truncated", "protocol", "transport"; NULL for
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
