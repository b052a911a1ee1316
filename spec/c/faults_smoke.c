/*
 * faults_smoke: the threaded API (lr_faults_start_string) and the HTTP
 * corners curl will not produce (pipelining, bare LF, chunk extensions and
 * trailers, bad requests), spoken over raw sockets.  Exit status 0 when
 * every check holds; failed checks are printed.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "faults/faults.h"

static int failures;

#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      failures++;                                                        \
      fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                    \
  } while (0)
#define CHECK_HAS(s, part)                                                            \
  do {                                                                                \
    if (strstr((s), (part)) == NULL) {                                                \
      failures++;                                                                     \
      fprintf(stderr, "%s:%d: no \"%s\" in:\n%s\n", __FILE__, __LINE__, (part), (s)); \
    }                                                                                 \
  } while (0)

static const char script[] =
  "respond = routes{\n"
  "  ['/a'] = function (req) return 'count ' .. req.count end,\n"
  "  ['/len'] = function (req) return tostring(#req.body) end,\n"
  "  ['/nil'] = function (req) end,\n"
  "  ['/late-reset'] = {delay = 0.2, reset = true},\n"
  "  ['/file'] = {file = {size = 1000}},\n"
  "  ['/bad-raw'] = {raw = {}},\n"
  "  ['/bad-size'] = {file = {size = -1}},\n"
  "  ['/bad-reason'] = {reason = {}},\n"
  "  default = 'default',\n"
  "}\n";

static int dial(int port) {
  struct sockaddr_in sa;
  struct timeval tv = { 5, 0 }; /* no check can wait forever */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((unsigned short)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    perror("connect");
    exit(1);
  }
  return fd;
}

/* Read until the peer closes (or 5 s pass); *reset tells how it ended. */
static char *read_all(int fd, int *reset) {
  size_t len = 0, cap = 1 << 16;
  char *buf = malloc(cap + 1);
  ssize_t n;
  while ((n = recv(fd, buf + len, cap - len, 0)) > 0) {
    len += (size_t)n;
    if (len == cap) buf = realloc(buf, (cap *= 2) + 1);
  }
  if (reset) *reset = n < 0;
  buf[len] = '\0';
  return buf;
}

/* Send `raw`, say we are done sending, and return everything answered. */
static char *talk(int port, const char *raw, size_t len) {
  int fd = dial(port);
  char *out;
  send(fd, raw, len, MSG_NOSIGNAL);
  shutdown(fd, SHUT_WR);
  out = read_all(fd, NULL);
  close(fd);
  return out;
}

#define TALK(port, lit) talk((port), (lit), sizeof(lit) - 1)

static int count(const char *s, const char *part) {
  int n = 0;
  for (; (s = strstr(s, part)) != NULL; s++) n++;
  return n;
}

static void *serve(void *f) {
  lr_faults_serve(f);
  return NULL;
}

/* One straight script of requests and the answers each must get: long,
 * but read top to bottom like the transcript it is. */
int main(void) {
  char err[512];
  char *out;
  int port, fd, reset;
  lr_faults *f, *g;

  lr_faults_free(NULL);
  f = lr_faults_start_string("inline.lua", script, NULL, err, sizeof err);
  if (f == NULL) {
    fprintf(stderr, "start: %s\n", err);
    return 1;
  }
  port = lr_faults_port(f);
  CHECK(port > 0);
  CHECK_HAS(lr_faults_address(f), "127.0.0.1:");

  out = TALK(port, "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /a?q HTTP/1.1\r\n\r\n");
  CHECK(count(out, "HTTP/1.1 200 OK\r\n") == 2);
  CHECK_HAS(out, "count 1");
  CHECK_HAS(out, "count 2");
  free(out);

  out = TALK(port, "\r\nGET /b HTTP/1.1\nHost: x\n\n"); /* bare LF */
  CHECK_HAS(out, "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n");
  CHECK_HAS(out, "default");
  free(out);

  out = TALK(port,
             "POST /len HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
             "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: y\r\n\r\n");
  CHECK_HAS(out, "\r\n\r\n11");
  free(out);

  out = TALK(port, "POST /len HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /a HTTP/1.1\r\n\r\n");
  CHECK_HAS(out, "\r\n\r\n3HTTP/1.1 200");
  free(out);

  out = TALK(port, "HEAD /a HTTP/1.1\r\n\r\n");
  CHECK_HAS(out, "Content-Length: 7\r\n");
  CHECK(strstr(out, "count") == NULL);
  free(out);

  fd = dial(port); /* HTTP/1.0: the server closes by itself */
  send(fd, "GET /a HTTP/1.0\r\n\r\n", 19, MSG_NOSIGNAL);
  out = read_all(fd, &reset);
  CHECK(!reset);
  CHECK_HAS(out, "Connection: close\r\n");
  free(out);
  close(fd);

  fd = dial(port); /* 100 Continue comes before the body is sent */
  send(fd, "POST /len HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n", 63,
       MSG_NOSIGNAL);
  {
    char buf[64] = { 0 };
    recv(fd, buf, sizeof buf - 1, 0);
    CHECK(strcmp(buf, "HTTP/1.1 100 Continue\r\n\r\n") == 0);
  }
  send(fd, "hi", 2, MSG_NOSIGNAL);
  shutdown(fd, SHUT_WR);
  out = read_all(fd, NULL);
  CHECK_HAS(out, "HTTP/1.1 200 OK\r\n");
  free(out);
  close(fd);

  out = TALK(port, "NOT A REQUEST\r\n\r\n");
  CHECK_HAS(out, "HTTP/1.1 400 ");
  free(out);
  out = TALK(port, "POST /a HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab");
  CHECK_HAS(out, "HTTP/1.1 400 ");
  free(out);
  out = TALK(port, "POST /a HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n");
  CHECK_HAS(out, "HTTP/1.1 501 ");
  free(out);
  out = TALK(port, "GET /a HTTP/2.0\r\n\r\n");
  CHECK_HAS(out, "HTTP/1.1 505 ");
  free(out);
  {
    size_t n = 70 * 1024;
    char *big = malloc(n + 64);
    int len = sprintf(big, "GET /a HTTP/1.1\r\nX-Big: ");
    memset(big + len, 'y', n);
    memcpy(big + len + n, "\r\n\r\n", 4);
    out = talk(port, big, (size_t)len + n + 4);
    CHECK_HAS(out, "HTTP/1.1 431 ");
    free(out);
    free(big);
  }

  /* a file's Range: the last N bytes (bytes=-N); several ranges, which
   * would need a multipart answer, get the whole file */
  out = TALK(port, "GET /file HTTP/1.1\r\nRange: bytes=-500\r\nConnection: close\r\n\r\n");
  CHECK_HAS(out, "HTTP/1.1 206 ");
  CHECK_HAS(out, "Content-Range: bytes 500-999/1000\r\n");
  free(out);
  out = TALK(port, "GET /file HTTP/1.1\r\nRange: bytes=0-1,5-6\r\nConnection: close\r\n\r\n");
  CHECK_HAS(out, "HTTP/1.1 200 OK\r\n");
  CHECK_HAS(out, "Content-Length: 1000\r\n");
  free(out);

  /* a refused answer names its field, as the script spells it */
  out = TALK(port, "GET /bad-raw HTTP/1.1\r\n\r\n");
  CHECK_HAS(out, "respond: 'raw' must be a string, got table");
  free(out);
  out = TALK(port, "GET /bad-size HTTP/1.1\r\n\r\n");
  CHECK_HAS(out, "respond: 'file.size' must be an integer");
  free(out);
  out = TALK(port, "GET /bad-reason HTTP/1.1\r\n\r\n");
  CHECK_HAS(out, "respond: 'reason' must be a string, got table");
  free(out);

  /* a NUL in the head is refused, not cut off where the script sees it */
  out = TALK(port, "GET /a HTTP/1.1\r\nX-Nul: a\0b\r\n\r\n");
  CHECK_HAS(out, "HTTP/1.1 400 ");
  free(out);
  /* a Content-Length is its value, leading zeros or not */
  out = TALK(port, "POST /len HTTP/1.1\r\nContent-Length: 000000000003\r\n\r\nabc");
  CHECK_HAS(out, "\r\n\r\n3");
  free(out);
  out = TALK(port, "POST /len HTTP/1.1\r\nContent-Length: 000000000004294967297\r\n\r\n");
  CHECK_HAS(out, "HTTP/1.1 413 ");
  free(out);

  out = TALK(port, "GET /nil HTTP/1.1\r\n\r\n");
  CHECK_HAS(out, "HTTP/1.1 500 ");
  CHECK_HAS(out, "respond returned nil");
  free(out);

  {
    struct timespec t0, t1;
    double secs;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fd = dial(port);
    send(fd, "GET /late-reset HTTP/1.1\r\n\r\n", 28, MSG_NOSIGNAL);
    out = read_all(fd, &reset);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    CHECK(reset);
    CHECK(out[0] == '\0');
    CHECK(secs >= 0.19 && secs < 2);
    free(out);
    close(fd);
  }

  /* the log escapes what is not UTF-8 */
  out = TALK(port, "GET /x HTTP/1.1\r\nX-Bin: \xff\x01\"\xc3\xa9\r\n\r\n");
  free(out);
  out = TALK(port, "GET /_faults/requests HTTP/1.1\r\n\r\n");
  CHECK_HAS(out, "\"x-bin\":\"\\u00ff\\u0001\\\"\xc3\xa9\"");
  CHECK(strstr(out, "_faults") == NULL);
  free(out);

  /* errors name the chunk and line, or the address */
  g = lr_faults_start_string("broken.lua", "x = 1\nrespond = (", NULL, err, sizeof err);
  CHECK(g == NULL);
  CHECK_HAS(err, "broken.lua:2:");
  g = lr_faults_start_string("fails.lua", "\nerror('nope')", NULL, err, sizeof err);
  CHECK(g == NULL);
  CHECK_HAS(err, "fails.lua:2: nope");
  g = lr_faults_start_string("bin.lua", "\x1bLua", NULL, err, sizeof err);
  CHECK(g == NULL);
  CHECK_HAS(err, "bin.lua: attempt to load a binary chunk");
  g = lr_faults_open_string("ok.lua", script, lr_faults_address(f), err, sizeof err);
  CHECK(g == NULL);
  CHECK_HAS(err, "cannot listen on 127.0.0.1:");
  g = lr_faults_open_string("ok.lua", script, "nowhere:x", err, sizeof err);
  CHECK(g == NULL);
  CHECK_HAS(err, "bad listen address 'nowhere:x'");

  /* stop before serving: serve returns at once */
  g = lr_faults_open_string("ok.lua", script, "localhost:0", err, sizeof err);
  CHECK(g != NULL);
  if (g) {
    CHECK_HAS(lr_faults_address(g), "127.0.0.1:");
    lr_faults_stop(g);
    CHECK(lr_faults_serve(g) == 0);
    lr_faults_free(g);
  }

  /* all connections' request bytes together are bounded: past the limit a
   * request that needs more room is answered 503, and what a closed
   * connection held is free again */
  g = lr_faults_open_string("bounded.lua", "respond = 200", NULL, err, sizeof err);
  CHECK(g != NULL);
  if (g) {
    pthread_t t;
    enum { N = 8, PART = 100 * 1024 };
    int fds[N], refused = 0, empty = 0;
    char *part = calloc(1, PART);
    lr_faults_set_input_limit(g, 256 * 1024);
    pthread_create(&t, NULL, serve, g);
    for (int i = 0; i < N; i++) {
      static const char head[] = "POST / HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n";
      fds[i] = dial(lr_faults_port(g));
      send(fds[i], head, sizeof head - 1, MSG_NOSIGNAL);
      send(fds[i], part, PART, MSG_NOSIGNAL);
      usleep(20000); /* read before the next: the first ones fit */
    }
    for (int i = 0; i < N; i++) {
      shutdown(fds[i], SHUT_WR); /* an unfinished body: closed unanswered */
      out = read_all(fds[i], NULL);
      refused += strstr(out, "HTTP/1.1 503 ") != NULL;
      empty += out[0] == '\0';
      free(out);
      close(fds[i]);
    }
    CHECK(refused > 0);
    CHECK(empty > 0);
    out = talk(lr_faults_port(g), "GET / HTTP/1.1\r\n\r\n", 18);
    CHECK_HAS(out, "HTTP/1.1 200 OK\r\n");
    free(out);
    lr_faults_stop(g);
    pthread_join(t, NULL);
    lr_faults_free(g);
    free(part);
  }

  /* free with a connection still hanging */
  g = lr_faults_start_string("hang.lua", "respond = {hang = true}", NULL, err, sizeof err);
  CHECK(g != NULL);
  if (g) {
    fd = dial(lr_faults_port(g));
    send(fd, "GET / HTTP/1.1\r\n\r\n", 18, MSG_NOSIGNAL);
    usleep(50000);
    lr_faults_free(g);
    out = read_all(fd, NULL);
    CHECK(out[0] == '\0');
    free(out);
    close(fd);
  }

  lr_faults_free(f);
  if (failures)
    fprintf(stderr, "faults_smoke: %d failed\n", failures);
  else
    printf("faults_smoke: ok\n");
  return failures != 0;
}
