/* http.h: what the libcurl helper's files share: one attempt's buffers and
 * the pieces that make it (attempt.c), used by a single call (perform.c),
 * batches (many.c) and the workflow transport (transport.c).  Public
 * headers and curl.h only: the helper is a user of the public API. */
#ifndef LUARETRY_HTTP_H
#define LUARETRY_HTTP_H

#include <stddef.h>

#include "luaretry_curl.h"

#define MAX_HEADERS 128

typedef struct {
  char *data;
  size_t len, cap;
  int failed;
} buffer;

typedef struct {
  buffer body;
  buffer header_text;           /* "name\0value\0" pairs of the last response */
  luaretry_header headers[MAX_HEADERS];
  size_t header_count;
  const char *upload;
  size_t upload_len, upload_pos;
} transfer;

/* One attempt of a call: the pieces luaretry_curl_perform and the batch
 * share. */
typedef struct {
  transfer t;                   /* body, headers, upload of this attempt */
  luaretry_request r;           /* the request as prepare() left it */
  struct curl_slist *headers;   /* set on the handle for the transfer */
  int idempotent;
} attempt;

/* The request's headers as a curl list; *failed on out of memory. */
struct curl_slist *lr_curl_header_list(const luaretry_request *r, int *failed);
/* Every option of one transfer of r on h, its answer into t. */
void lr_curl_configure(CURL *h, const luaretry_request *r, transfer *t,
                       struct curl_slist *headers, double timeout);
/* Points t->headers at the pairs received. */
void lr_curl_index_headers(transfer *t);

/* Before attempt `n` of call c: prepare(), is_idempotent(), the header
 * list, then every option of the attempt on h (timeout: `timeout`). */
luaretry_code lr_curl_attempt_setup(luaretry_call *c, const luaretry_request *req, int n,
                                    CURL *h, double timeout, attempt *a);
/* After the transfer ended with `res`: the outcome to report, pointing
 * into a (valid until the next setup on it). */
luaretry_code lr_curl_attempt_finish(CURL *h, attempt *a, CURLcode res, luaretry_outcome *out);
void lr_curl_attempt_free(attempt *a);

/* CURLOPT_CONNECTTIMEOUT_MS: `connect` seconds when > 0 and shorter than
 * the attempt's `timeout` (the attempt's own already holds otherwise). */
void lr_curl_connect_timeout(CURL *h, double connect, double timeout);

/* One transfer of h on the multi handle m, ended early by a cancel of c. */
CURLcode lr_curl_transfer_once(CURLM *m, CURL *h, luaretry_call *c);

/* CLOCK_MONOTONIC in seconds. */
double lr_curl_now(void);

#endif
