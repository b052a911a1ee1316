/* relay.c: a middle service on loopback, for a chain of services in the
 * specs, the bench and users' own tests:
 *
 *   relay POLICY UPSTREAM   (prints "listening on 127.0.0.1:PORT")
 *
 * Each request it gets (any method, a body by Content-Length) is sent on
 * to UPSTREAM + its path as one call of POLICY through the curl helper,
 * and the last answer is given back (502 when none came, 504 when the
 * call's deadline ended it).  The call gets what the inbound request
 * carried (luaretry_call_options_inbound): the time its caller still waits
 * and the retries it lets this layer make; with the policy's `propagate`
 * each attempt tells the next layer the same.  A header that does not read
 * is said once on standard error.  One thread per connection, so one slow
 * forward never holds the others; each answer closes its connection.
 * Public headers only. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "luaretry.h"
#include "luaretry_curl.h"

#define MAX_HEAD    16384
#define MAX_BODY    (1 << 20)
#define MAX_HEADERS 64

static luaretry_policy *policy;
static const char *upstream;
static atomic_int said_garbage;

typedef struct {
  char *data;
  size_t len;
} buffer;

static size_t to_buffer(void *ud, const char *data, size_t len) {
  buffer *b = ud;
  if (b->len + len > MAX_BODY) return 0; /* the call fails: never unbounded */
  char *more = realloc(b->data, b->len + len + 1);
  if (!more) return 0;
  memcpy(more + b->len, data, len);
  b->data = more;
  b->len += len;
  return len;
}

typedef struct {
  char head[MAX_HEAD + 1];
  char method[16], path[2048];
  luaretry_header headers[MAX_HEADERS];
  size_t header_count;
  char *body;
  size_t body_len;
} request;

/* Reads the head, its headers (names lower-cased in place) and a body of
 * Content-Length bytes; 0, or -1 on anything else. */
static int read_request(int fd, request *r) {
  size_t got = 0;
  char *end = NULL;
  while (!end) {
    if (got == MAX_HEAD) return -1;
    ssize_t n = read(fd, r->head + got, MAX_HEAD - got);
    if (n <= 0) return -1;
    got += (size_t)n;
    r->head[got] = '\0';
    end = strstr(r->head, "\r\n\r\n");
  }
  size_t head_len = (size_t)(end - r->head) + 4;
  *end = '\0';
  char *save = NULL; /* strtok_r: one thread per connection */
  char *line = strtok_r(r->head, "\r\n", &save);
  if (!line || sscanf(line, "%15s %2047s", r->method, r->path) != 2) return -1;
  long length = 0;
  while ((line = strtok_r(NULL, "\r\n", &save)) && r->header_count < MAX_HEADERS) {
    char *colon = strchr(line, ':');
    if (!colon) return -1;
    *colon = '\0';
    for (char *c = line; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
    char *value = colon + 1;
    while (*value == ' ') value++;
    if (strcmp(line, "content-length") == 0) length = atol(value);
    r->headers[r->header_count].name = line;
    r->headers[r->header_count++].value = value;
  }
  if (length < 0 || length > MAX_BODY) return -1;
  r->body_len = (size_t)length;
  r->body = malloc(r->body_len + 1);
  if (!r->body) return -1;
  size_t have = got - head_len;
  if (have > r->body_len) have = r->body_len;
  memcpy(r->body, r->head + head_len, have);
  while (have < r->body_len) {
    ssize_t n = read(fd, r->body + have, r->body_len - have);
    if (n <= 0) return -1;
    have += (size_t)n;
  }
  return 0;
}

static void answer(int fd, long status, const buffer *body) {
  char head[128];
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 %ld Relayed\r\nContent-Length: %zu\r\n"
                   "Connection: close\r\n\r\n",
                   status, body->len);
  if (write(fd, head, (size_t)n) != n) return;
  if (body->len && write(fd, body->data, body->len) < 0) return;
}

/* Forwards r as one call; the status to give back. */
static long forward(const request *r, buffer *body) {
  luaretry_call_options o;
  luaretry_call_options_init(&o);
  if (luaretry_call_options_inbound(policy, r->headers, r->header_count, &o) != LUARETRY_OK &&
      !atomic_exchange(&said_garbage, 1))
    fprintf(stderr, "relay: an inbound deadline or retries header does not read: ignored\n");
  luaretry_header out[MAX_HEADERS];
  size_t n = 0;
  for (size_t i = 0; i < r->header_count; i++)
    if (strcmp(r->headers[i].name, "host") && strcmp(r->headers[i].name, "content-length"))
      out[n++] = r->headers[i];
  char url[4096];
  snprintf(url, sizeof url, "%s%s", upstream, r->path);
  luaretry_request req = { .method = r->method,
                           .url = url,
                           .headers = out,
                           .header_count = n,
                           .body = r->body_len ? r->body : NULL,
                           .body_len = r->body_len };
  luaretry_call *c = NULL;
  if (luaretry_call_begin(policy, &o, &c) != LUARETRY_OK) return 500;
  CURL *h = curl_easy_init();
  luaretry_curl_options co;
  luaretry_curl_options_init(&co);
  co.sink = to_buffer;
  co.sink_ud = body;
  luaretry_decision d;
  long status = 502;
  if (h && luaretry_curl_perform(policy, c, h, &req, &co, &d) == LUARETRY_OK) {
    long got = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &got);
    if (got > 0)
      status = got;
    else if (d.reason == LUARETRY_REASON_DEADLINE)
      status = 504;
  }
  if (h) curl_easy_cleanup(h);
  luaretry_call_free(c);
  return status;
}

static void *serve(void *arg) {
  int fd = (int)(intptr_t)arg;
  request *r = calloc(1, sizeof *r);
  buffer body = { NULL, 0 };
  if (r && read_request(fd, r) == 0) answer(fd, forward(r, &body), &body);
  if (r) free(r->body);
  free(r);
  free(body.data);
  close(fd);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: relay POLICY UPSTREAM\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  upstream = argv[2];
  if (luaretry_policy_new(&policy) != LUARETRY_OK ||
      luaretry_policy_load_file(policy, argv[1]) != LUARETRY_OK) {
    fprintf(stderr, "relay: %s\n", policy ? luaretry_policy_errmsg(policy) : "out of memory");
    return 3;
  }
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  socklen_t alen = sizeof a;
  if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 128) != 0 ||
      getsockname(s, (struct sockaddr *)&a, &alen) != 0) {
    perror("relay");
    return 1;
  }
  printf("listening on 127.0.0.1:%d\n", ntohs(a.sin_port));
  fflush(stdout);
  for (;;) { /* until killed: the spec that started it stops it by its PID */
    int fd = accept(s, NULL, NULL);
    if (fd < 0) continue;
    pthread_t t;
    if (pthread_create(&t, NULL, serve, (void *)(intptr_t)fd) != 0)
      close(fd);
    else
      pthread_detach(t);
  }
}
