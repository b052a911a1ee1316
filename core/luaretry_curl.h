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
} luaretry_curl_options;

/*
 * Performs `req` on handle `h` as call `c` of policy `p` until the policy
 * stops it.  Sets on h, for each attempt: URL, method, headers, the body
 * (sent whole again on every attempt), timeouts clipped to the deadline,
 * and its own write/header/read/seek callbacks; other options the host set
 * (TLS, proxy, auth...) are kept.  Returns LUARETRY_OK when a decision
 * was reached (see final->reason), or an error code with
 * luaretry_call_errmsg(c) / luaretry_policy_errmsg(p).
 * luaretry_call_cancel(c) interrupts a transfer as well as a wait.
 */
luaretry_code luaretry_curl_perform(luaretry_policy *p, luaretry_call *c, CURL *h,
                                    const luaretry_request *req,
                                    const luaretry_curl_options *o,
                                    luaretry_decision *final);

/* A transport for luaretry_policy_run_workflow(): each http.* request of
 * the script is one attempt on `h`; `c` (may be NULL) cancels transfers.
 * Pass luaretry_curl_transport_perform as the transport, the handle as ud. */
typedef struct luaretry_curl_transport luaretry_curl_transport;
luaretry_code luaretry_curl_transport_new(CURL *h, luaretry_call *c,
                                          luaretry_curl_transport **out);
void luaretry_curl_transport_free(luaretry_curl_transport *t);
luaretry_code luaretry_curl_transport_perform(void *t, const luaretry_request *req,
                                              double timeout, luaretry_response *resp);

/* The transport failure name of a curl result: "connect", "timeout",
 * "reset", "dns", "tls", "truncated", "protocol", "transport"; NULL for
 * CURLE_OK. */
const char *luaretry_curl_error_name(CURLcode rc);

#ifdef __cplusplus
}
#endif
#endif
