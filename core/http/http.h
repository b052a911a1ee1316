/* http.h: what the libcurl helper's files share: one transfer's callbacks
 * and bounded buffers (transfer.c), one attempt made of it (attempt.c),
 * used by a single call (perform.c), batches (many.c) and the workflow
 * transport (transport.c).  Public headers and curl.h only: the helper is
 * a user of the public API. */
#ifndef LUARETRY_HTTP_H
#define LUARETRY_HTTP_H

#include <stddef.h>

#include "luaretry_curl.h"

typedef struct {
  char *data;
  size_t len, cap;
  int failed;
} lr_http_buffer;

/* ---- digest.c: algorithms in order of strength */
enum { LR_CRC32C, LR_MD5, LR_SHA256, LR_SHA512, LR_ALGS };

/* Running hashes of a body, of the algorithms in `algs` (bits). */
typedef struct {
  void *md[LR_ALGS]; /* OpenSSL's EVP_MD_CTX, for md5 and the sha-2 */
  uint32_t crc;
  unsigned algs;
} lr_hash;

/* A digest someone states: a server's field, or the user's --checksum. */
typedef struct {
  const char *field; /* "repr-digest", ...; NULL: none stated */
  int alg;
  size_t len;
  unsigned char value[64];
} lr_digest_said;

/* One call's resumable download (resume.c): what the sink holds. */
typedef struct {
  const luaretry_curl_resume *opt; /* NULL: no resuming */
  uint64_t have;                   /* bytes of the current version in the sink */
  uint64_t total;                  /* its whole length; 0: not known */
  uint64_t end;                    /* where this attempt's 206 part ends
                                      (its last byte + 1); 0: no part */
  char validator[256];             /* its strong ETag or Last-Modified; "": none */
  int initial;                     /* `have` is the host's offset (-C -) */
  int asking;                      /* this attempt asks Range: bytes=have- */
  int decided;                     /* this attempt's answer was judged */
  int bad_range;                   /* ... and it could not be appended */
  int drop;                        /* ... and its body goes nowhere (416) */
  int aside;                       /* ... an error answer: its body is the
                                      script's, never the sink's */
  char why[200];
  char restart_note[200]; /* the restart from zero the next attempt makes,
                             said when it begins; "": none */
  int restart_said;       /* said once this call: never again */
  lr_hash whole;          /* of what the sink holds, from its byte 0 */
  int whole_ok;           /* whole covers every byte the sink holds */
  lr_digest_said expect;  /* the host's checksum (field NULL: none) */
  int expect_misses;      /* answers that did not match it */
} lr_resume;

/* Where one call's bodies go: the host's side of luaretry_curl_options or
 * of a batch job. */
typedef struct {
  size_t body_limit;     /* bytes of each response kept for the script */
  luaretry_sink_fn sink; /* the final body, or with restart every one */
  void *sink_ud;
  luaretry_restart_fn restart; /* set: sink streams every attempt's body */
  luaretry_upload_fn upload;   /* set: the request body is read from here */
  void *upload_ud;
  double stall_timeout; /* the policy's; 0: none */
  long stall_speed;     /* bytes per second */
  lr_resume *resume;    /* the call's, or NULL */
  /* a workflow's request (transport.c): */
  int limit_fails;       /* a body past body_limit fails the attempt */
  double until;          /* > 0: lr_curl_now() by which every attempt ends
                            (what is left of the run's time) */
  luaretry_call *parent; /* or NULL: its cancel cancels the call too */
  /* the attempt whose answer ended a hedged round, before its memory goes
   * (a hedge's goes with the round); o points into that attempt */
  void (*landed)(void *ud, const luaretry_outcome *o);
  void *landed_ud;
  uint64_t max_body; /* the host's limit on a streamed body (luaretry_curl_job) */
} lr_io;

/* One transfer's state, what curl's callbacks see. */
typedef struct {
  lr_http_buffer body; /* at most body_limit bytes of the response */
  size_t body_limit;
  int limit_fails;         /* a longer body fails the transfer (else
                                   the rest is only streamed) */
  size_t body_seen;        /* bytes of the response body so far */
  luaretry_sink_fn stream; /* every byte as it comes, or NULL */
  void *stream_ud;
  int body_too_long;          /* a body past body_limit where that fails */
  int stream_failed;          /* the sink refused: the host stops the call */
  uint64_t max_body;          /* streamed bytes past this fail as too_large; 0: none */
  uint64_t streamed;          /* bytes of this attempt given to stream */
  int too_large;              /* it passed max_body */
  lr_http_buffer header_text; /* "name\0value\0" pairs of the last response */
  size_t head_bytes;          /* of the response's head so far */
  int headers_too_long;       /* past LUARETRY_CURL_MAX_HEADER_BYTES */
  luaretry_header *headers;   /* index into header_text, header_count used */
  size_t header_count, header_cap;
  const char *upload; /* the body in memory, or NULL with reader */
  size_t upload_len, upload_pos;
  luaretry_upload_fn reader; /* the body through the host, or NULL */
  void *reader_ud;
  int upload_failed;            /* the reader gave nothing: the host stops */
  luaretry_restart_fn restart;  /* the stream's: a resumed answer starts over */
  lr_resume *resume;            /* this attempt may append, or NULL */
  lr_resume *call;              /* the call's, a hedge's too (its checksum) */
  long status_code;             /* of the last status line */
  double stall_timeout;         /* CURLOPT_LOW_SPEED_TIME; 0: none */
  long stall_speed;             /* CURLOPT_LOW_SPEED_LIMIT */
  char errbuf[CURL_ERROR_SIZE]; /* libcurl's own message of a failure */
  char detail[160];             /* ours, when we ended the transfer (or the
                                   host's sink or upload stopped it) */
  int digest_ready;             /* the hashes below were chosen */
  int coded;                    /* a Content-Encoding: the server's digests
                                   are of other bytes than curl gives */
  lr_hash part;                 /* of this answer's body */
  lr_digest_said said_whole;    /* Repr-Digest, x-goog-hash */
  lr_digest_said said_part;     /* Content-Digest, Content-MD5 */
} lr_transfer;

/* One attempt of a call: the pieces luaretry_curl_perform and the batch
 * share. */
typedef struct {
  lr_transfer t;              /* body, headers, upload of this attempt */
  luaretry_request r;         /* the request as prepare() left it */
  struct curl_slist *headers; /* set on the handle for the transfer */
  int idempotent;
} lr_http_attempt;

/* deliver.c: the final body to the host, once the call stopped: restart()
 * first when set (the sink held other bytes), then the sink (when set)
 * gets len bytes.  0, or -1 when either refused (the call stops with
 * LUARETRY_E_OPERATION), why said in `why` (cap bytes; 0: not said). */
int lr_curl_give_body(luaretry_sink_fn sink, luaretry_restart_fn restart, void *ud,
                      const char *data, size_t len, char *why, size_t cap);

/* sendable.c: LUARETRY_OK when the host's request r can be sent as it
 * means (an http or https URL, a method and header names that are tokens,
 * no line break in a header's value, a body where body_len says one),
 * else LUARETRY_E_ARG with why in `why` (cap bytes), or LUARETRY_E_NOMEM. */
#define LR_CURL_TOKEN_RULE "RFC 9110's token: letters, digits and !#$%&'*+-.^_`|~"
luaretry_code lr_curl_sendable(const luaretry_request *r, char *why, size_t cap);

/* The request's headers as a curl list; *failed on out of memory. */
struct curl_slist *lr_curl_header_list(const luaretry_request *r, int *failed);
/* Every option of one transfer of r on h, its answer into t (whose
 * body_limit, stream and reader the caller set). */
void lr_curl_configure(CURL *h, const luaretry_request *r, lr_transfer *t,
                       struct curl_slist *headers, double timeout);
/* Takes our callbacks and buffers off h again, so that a host reusing the
 * handle never reaches memory of ours. */
void lr_curl_release(CURL *h);
/* After a transfer: points t->headers at the pairs received; 0, or -1 when
 * out of memory. */
int lr_curl_index_headers(lr_transfer *t);
/* The transport failure's name and detail of a transfer that ended with
 * res (NULL, NULL for a complete response). */
void lr_curl_failure(const lr_transfer *t, CURLcode res, const char **error, const char **detail);

/* Before attempt `n` of call c: prepare(), is_idempotent(), the header
 * list, the io's restart, then every option of the attempt on h
 * (timeout: `timeout`). */
luaretry_code lr_curl_attempt_setup(luaretry_call *c, const luaretry_request *req, int n, CURL *h,
                                    double timeout, const lr_io *io, lr_http_attempt *a);
/* After the transfer ended with `res`: the outcome to report, pointing
 * into a (valid until the next setup on it).  LUARETRY_E_OPERATION when
 * the host's sink or upload stopped it (nothing to report). */
luaretry_code lr_curl_attempt_finish(CURL *h, lr_http_attempt *a, CURLcode res,
                                     luaretry_outcome *out);
void lr_curl_attempt_free(lr_http_attempt *a);

/* ---- digest.c */

const char *lr_alg_name(int alg);
/* 0, or -1 when out of memory. */
int lr_hash_start(lr_hash *h, unsigned algs);
void lr_hash_add(lr_hash *h, const void *data, size_t len);
/* The value so far of alg into out: its length, 0 when alg is not hashed. */
size_t lr_hash_value(const lr_hash *h, int alg, unsigned char out[64]);
void lr_hash_free(lr_hash *h);
/* One response header (lower-case name): a digest field's strongest
 * usable value into *whole (Repr-Digest, x-goog-hash) or *part
 * (Content-Digest, Content-MD5) when stronger than what they hold; 1 when
 * it took one, 0 otherwise (another field, nothing usable). */
int lr_digest_read(const char *name, const char *value, lr_digest_said *whole,
                   lr_digest_said *part);
/* "sha-256=HEX" (sha-512, md5) into *out; 0, or -1 if it is not one. */
int lr_digest_hex(const char *spec, lr_digest_said *out);
/* v as lower-case hex, cut to fit cap. */
void lr_digest_text(const unsigned char *v, size_t len, char *out, size_t cap);
/* At t's first body byte (or its end, with none): the fields read and the
 * hashes started, t->resume's whole one too when the sink starts from
 * zero; -1 when out of memory. */
int lr_digest_begin(lr_transfer *t);
/* After a complete 2xx answer on t: NULL when every digest stated (the
 * server's, the host's) matches what came or cannot be checked, else the
 * error's name ("digest_mismatch", "checksum_mismatch"), why in
 * t->detail. */
const char *lr_digest_check(lr_transfer *t);

/* ---- resume.c */

/* A call's state, from the host's options (NULL: no resuming); -1 when
 * the host's checksum is not one (LUARETRY_E_ARG). */
int lr_resume_init(lr_resume *rs, const luaretry_curl_resume *opt);
void lr_resume_free(lr_resume *rs);
/* Before an attempt of r: whether it asks for the rest (then the sink is
 * not restarted), and its Range and If-Range headers appended to *list;
 * -1 when out of memory. */
int lr_resume_before(lr_resume *rs, const luaretry_request *r, struct curl_slist **list);
/* At the answer's first body byte (t's headers are in): 0 to go on
 * (appending, or restarted from zero), -1 to fail the attempt ("range"). */
int lr_resume_first_byte(lr_transfer *t);
/* "bytes FIRST-LAST/TOTAL" into r (TOTAL "*": 0); 0, or -1 if it is not. */
int lr_content_range(const char *v, uint64_t r[3]);
/* Before len more bytes of an appended part are written: 0, or -1 (the
 * attempt fails as "range") when they go past its Content-Range. */
int lr_resume_body(lr_transfer *t, size_t len);
/* After a complete answer: "" when what the sink holds is whole, else
 * why not (a 206 part that ended short of the total), into rs->why. */
const char *lr_resume_short(lr_resume *rs);
/* After the attempt: keep what the sink holds for the next, or not. */
void lr_resume_after(lr_resume *rs, const luaretry_outcome *out, long status);
/* The call stopped after t: when t's error answer was set aside (the sink
 * kept the download's bytes) and the call did not end by its deadline or
 * a cancel (which keep them for a later run), nor into the host's own
 * file (an offset without a validator: -C -), the sink is restarted and
 * given that answer's body (its first body_limit bytes); -1 when the sink
 * refused. */
int lr_resume_end(lr_transfer *t, const luaretry_decision *final);

/* CURLOPT_CONNECTTIMEOUT_MS: `connect` seconds when > 0 and shorter than
 * the attempt's `timeout` (the attempt's own already holds otherwise). */
void lr_curl_connect_timeout(CURL *h, double connect, double timeout);

/* One transfer of h on the multi handle m, ended early by a cancel of c. */
CURLcode lr_curl_transfer_once(CURLM *m, CURL *h, luaretry_call *c);

/* The calling thread's multi handle (kept between calls, so connections
 * are reused), or a private one when it is in use (*private_multi set);
 * NULL when none can be made.  Give it back with lr_curl_multi_give. */
CURLM *lr_curl_multi_take(int *private_multi);
void lr_curl_multi_give(CURLM *m, int private_multi);

/* hedge.c: what prepare() made for attempt a lives in the call until its
 * next prepare, which a hedge's makes while a is in flight: a copy of a's
 * request of its own (*block, to free once a is over), its upload pointed
 * at it.  Nothing when prepare() left the host's request `req` as it was.
 * 0, or -1 when out of memory. */
int lr_curl_own_request(const luaretry_request *req, lr_http_attempt *a, char **block);

/* hedge.c: attempt `id` (started with luaretry_call_start) on h, with
 * hedges beside it while the policy's hedge allows, until one decides:
 * the others cancelled, the winner's body given to the sink (*delivered:
 * the caller gives no body).  `a` is the attempt on h. */
luaretry_code lr_curl_hedged(luaretry_call *c, CURL *h, CURLM *m, const luaretry_request *req,
                             const lr_io *io, lr_http_attempt *a, int id, int *delivered,
                             luaretry_decision *final);

/* CLOCK_MONOTONIC in seconds. */
double lr_curl_now(void);

#endif
