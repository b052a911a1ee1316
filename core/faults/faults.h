/*
 * faults.h: a Lua-scripted, fault-injecting HTTP/1.1 test server
 * (internal to luaretry; not part of the public header).
 *
 * The script's API is described at the top of server.c and in
 * policies/faults/README.md.  The library never prints and keeps no global
 * state; errors go into the caller's buffer ("path:line: ..." for scripts,
 * the address for bind errors).
 *
 * Threads: one server is served by one thread at a time.  lr_faults_stop()
 * may be called from any thread and from a signal handler.
 */
#ifndef LR_FAULTS_H
#define LR_FAULTS_H

#include <stddef.h>

typedef struct lr_faults lr_faults;

/*
 * Load a script (text only; chunk name = its path; sandboxed, see
 * server.c) and bind `listen`: "HOST:PORT", "[V6]:PORT", "localhost:PORT",
 * ":PORT" or "PORT" (both on 127.0.0.1); NULL means "127.0.0.1:0", and
 * port 0 picks a free port.  Only a loopback address is taken: a server
 * that anyone who reaches it can drive is a choice (lr_faults_open_any).
 * Nothing is served until lr_faults_serve().  NULL on failure.
 */
lr_faults *lr_faults_open(const char *script_path, const char *listen, char *err, size_t errlen);
/* The same, on any address (0.0.0.0, a LAN address): `luaretry faults
 * --listen-any`. */
lr_faults *lr_faults_open_any(const char *script_path, const char *listen, char *err,
                              size_t errlen);
/* The same in two steps, for a host that must be able to stop the load:
 * lr_faults_new() makes a server with nothing loaded, on which
 * lr_faults_stop() (from a signal handler, say) already works: the
 * script that lr_faults_load() then runs is stopped at its next
 * instructions, even in an endless loop, and a later lr_faults_serve()
 * returns at once.  lr_faults_load(): 0, or -1 with the message in err
 * (then f is only for lr_faults_free()); `any` as lr_faults_open_any. */
lr_faults *lr_faults_new(char *err, size_t errlen);
/* 1 when addr is a --listen address (HOST:PORT, [V6]:PORT, PORT or HOST),
 * before anything is resolved: a host tells a usage error from a
 * failure to listen. */
int lr_faults_listen_ok(const char *addr);
int lr_faults_load(lr_faults *f, const char *script_path, const char *listen, int any, char *err,
                   size_t errlen);
/* Whether the bound address is a loopback one. */
int lr_faults_is_loopback(const lr_faults *f);
lr_faults *lr_faults_open_string(const char *chunkname, const char *source, const char *listen,
                                 char *err, size_t errlen);

/* The bytes of requests all connections together may hold (512 MiB by
   default): one whose request needs more room past it is answered 503 and
   closed.  Before serving. */
void lr_faults_set_input_limit(lr_faults *f, size_t bytes);

/* Serve in the calling thread until lr_faults_stop(): 0, or -1 (errno set)
   if polling failed. */
int lr_faults_serve(lr_faults *f);

/* open_string + a background thread running lr_faults_serve(). */
lr_faults *lr_faults_start_string(const char *chunkname, const char *source, const char *listen,
                                  char *err, size_t errlen);

int lr_faults_port(const lr_faults *f);
/* The bound address as "127.0.0.1:PORT" or "[::1]:PORT". */
const char *lr_faults_address(const lr_faults *f);

/* Ask the server to stop, for good: a later lr_faults_serve() returns at
   once, and a script running (even in an endless loop) is stopped at its
   next instructions.  Async-signal-safe, idempotent. */
void lr_faults_stop(lr_faults *f);
/* Stop, join the thread if any, close everything and free; accepts NULL.
   Not to be called while another thread is inside lr_faults_serve()
   unless that thread was started by lr_faults_start_string(). */
void lr_faults_free(lr_faults *f);

/* ------------------------------------------ HTTP parsing (http_parse.c) */

#define LR_HTTP_MAX_HEAD    (64 * 1024)
/* A body is kept in its first LR_HTTP_MAX_BODY bytes (req.body); a longer
   one, up to LR_HTTP_MAX_LENGTH (Content-Length only, not chunked), is
   counted and hashed as it passes and dropped: an upload of any size
   costs the server nothing. */
#define LR_HTTP_MAX_BODY    (16 * 1024 * 1024)
#define LR_HTTP_MAX_LENGTH  ((size_t)4 << 30)
#define LR_HTTP_MAX_HEADERS 256

enum { LR_HTTP_MORE = 0, LR_HTTP_DONE = 1 }; /* else an HTTP error status */

typedef struct lr_http_header {
  char *name, *value;
} lr_http_header;

/* One request, parsed in place in the connection's input buffer.  Zero it
   before the first byte of each request. */
typedef struct lr_http_req {
  /* results, valid once head_len > 0 */
  const char *method, *path, *query; /* the target is split at '?' */
  int minor;                         /* HTTP/1.minor */
  int keep_alive, expect_continue;
  size_t nheaders;
  lr_http_header headers[LR_HTTP_MAX_HEADERS];
  size_t head_len;         /* bytes of head; the body starts here */
  size_t body_len;         /* body bytes so far in the buffer (decoded, if chunked) */
  size_t dropped;          /* body bytes past LR_HTTP_MAX_BODY, passed on */
  unsigned long long hash; /* FNV-1a 64 of the whole body, once dropping */
  size_t end;              /* once done: where the next request starts */
  /* parse state */
  size_t scan, raw, content_length, chunk_left;
  int chunked, chunk_state;
} lr_http_req;

/* Parse what has arrived in buf[0..*len).  Chunked bodies are decoded in
   place, so *len may shrink.  Returns LR_HTTP_MORE, LR_HTTP_DONE or the
   status to refuse the request with (400, 413, 431, 501). */
int lr_http_parse(lr_http_req *r, char *buf, size_t *len);

/* Is the body complete? (So a 100 Continue is pointless.) */
int lr_http_body_done(const lr_http_req *r);

/* FNV-1a 64 of n bytes, continuing from h (0xcbf29ce484222325 to start). */
unsigned long long lr_http_fnv1a(unsigned long long h, const char *s, size_t n);

/* The first header of that (lower-case) name, or NULL. */
const char *lr_http_header_get(const lr_http_req *r, const char *name);

const char *lr_http_reason(int status);

#endif
