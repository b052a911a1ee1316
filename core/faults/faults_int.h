/* faults_int.h: what the fault server's files share: server.c (the event
 * loop, reading, set up, the /_faults/ endpoints), answer.c (the
 * script's answers), request_log.c (the request log), conn.c
 * (buffers, a connection's answer and close). */
#ifndef LR_FAULTS_INT_H
#define LR_FAULTS_INT_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>

#include <lua.h>

#include "faults.h"
#include "sandbox/sandbox.h"

#define LOG_MAX       100000            /* entries of the request log, and */
#define LOG_MAX_BYTES (8 * 1024 * 1024) /* its bytes: the oldest go first */
#define READ_MIN      16384
#define IN_MAX        (LR_HTTP_MAX_HEAD + LR_HTTP_MAX_BODY + 65536)
#define IN_TOTAL_MAX  ((size_t)512 * 1024 * 1024) /* of all connections: lr_faults_set_input_limit */
#define BUILTIN       "/_faults/"

/* ------------------------------------------------------------ buffers */

typedef struct sbuf {
  char *p;
  size_t len, cap;
  int oom;
} sbuf;
void sb_add(sbuf *b, const void *s, size_t n);
void sb_str(sbuf *b, const char *s);
void sb_fmt(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_free(sbuf *b);

/* ------------------------------------------------------------ state */

enum { C_READ, C_WRITE, C_DELAY, C_HANG, C_STREAM, C_DEAD };

typedef struct conn {
  int fd, state;
  int eof;            /* the client will send no more */
  int close_after;    /* close once the response is out */
  int reset_when_due; /* the delayed action is a reset, not an answer */
  int reset_at_end;   /* the answer (or stream) ends with a reset, not a FIN */
  int head_seen;
  double head_time, due;
  double read_time; /* when the last bytes came in (a buffered head's time) */
  char *in;
  size_t inlen, incap;
  sbuf out;
  size_t outoff, hold; /* in C_DELAY, bytes past `hold` wait for `due` */
  lr_http_req req;
  long long serial;  /* the connection's number, from 1: shows reuse */
  char *stream;      /* C_STREAM: sent stream_left times (< 0: for ever), */
  size_t stream_len; /* one every stream_every seconds, then a close */
  long long stream_left;
  double stream_every;
  int file_on; /* C_STREAM of a `file` answer: bytes made as sent */
  unsigned long long file_pos, file_end, file_cut; /* cut: the reset */
  unsigned file_seed;
  double cut_since; /* when the cut was reached: the reset waits (up to
                           a second) until the client has every byte sent */
} conn;

struct lr_faults {
  lr_sandbox *sb;      /* the script's state (core/sandbox/), and its */
  lua_State *L;        /* Lua state */
  atomic_int stopping; /* lr_faults_stop() came: the script is stopped too */
  int paths_ref;       /* registry: path -> {count = n, state = {}} */
  int listen_fd, wake_fd, port;
  int accept_paused; /* out of descriptors: retry soon */
  int threaded;
  pthread_t thread;
  struct timespec t0;
  char address[80];
  conn **conns;
  size_t nconns, capconns;
  struct pollfd *pfds;
  size_t cappfds;
  char **log; /* ring of rendered JSON entries */
  size_t log_first, log_count;
  size_t log_bytes; /* their length, NULs included */
  long long total;
  long long connections;         /* accepted so far */
  size_t in_bytes, in_limit;     /* request buffers of all connections, and their bound */
  unsigned long long file_bytes; /* body bytes of `file` answers sent */
};

/* request_log.c */
void fault_log_entry(lr_faults *f, conn *c);
void fault_log_clear(lr_faults *f);

/* answer.c */
int fault_load_script(lr_faults *f, const char *path, const char *chunkname, const char *source,
                      char *err, size_t errlen);
void fault_answer_script(lr_faults *f, conn *c);
int fault_reset_paths(lua_State *L);

/* conn.c */
double fault_elapsed(const lr_faults *f);
void fault_conn_close(lr_faults *f, conn *c, int hard); /* hard: a TCP reset */
void fault_put_simple(conn *c, int status, const char *ctype, const char *body, size_t n);
void fault_stream_free(conn *c);
/* Byte i of a `file` answer's content (its seed): what specs check. */
unsigned char fault_file_byte(unsigned long long i, unsigned seed);

#endif
