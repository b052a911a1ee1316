/* test_curl_io.c: the curl helper's bodies and schemes, through the public
 * API against a small server of our own (a thread answering canned
 * responses on 127.0.0.1, as curl's tests do):
 * - streaming: with a restart function the sink gets every attempt's body
 *   as it arrives, restart() before each, and the script sees only
 *   body_limit bytes of it;
 * - uploads through the host's reader: every attempt reads the body from
 *   offset 0, whole; a reader that gives nothing stops the call with
 *   LUARETRY_E_OPERATION, the transfer unreported;
 * - a redirect to file:// or ftp:// is not followed, even where the host
 *   asked for redirects: http and https only;
 * - a compression bomb that the host asked curl to inflate streams
 *   through: 256 MiB reach the sink, memory stays flat;
 * - resume: a truncated 200 with Accept-Ranges and a strong ETag is
 *   continued by a 206 that fits (no restart), or started over by a 200
 *   (one restart, one note); a 206 is proof of ranges without
 *   Accept-Ranges;
 * - digests for any host: a body that is not its Content-MD5 fails its
 *   attempt (digest_mismatch) and the next one's is kept; a checksum that
 *   is not one is LUARETRY_E_ARG;
 * - a call's own deadline (LUARETRY_CALL_DEADLINE) bounds the attempt's
 *   transfer, against a server that never answers, where the policy's
 *   attempt_timeout (30 s) would not;
 * - a sink that refuses the final body given whole stops the call
 *   (LUARETRY_E_OPERATION), in a single call and in a batch;
 * - what no attempt can send is refused before any (LUARETRY_E_ARG): a
 *   scheme other than http or https, a header or method that would split
 *   the request, a body_len with no body. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "luaretry_curl.h"

/* ---- the server: one canned response per connection, in order */

typedef struct {
  int fd, port;
  const char *const *answers; /* NULL-terminated */
  size_t sizes[8];            /* each answer's length (0: strlen) */
  pthread_t thread;
} server;

/* Reads a request: its head, then Content-Length bytes of body. */
static void read_request(int c) {
  char buf[65536];
  size_t have = 0;
  long long body = -1, got = 0;
  for (int rounds = 0; rounds < 100000; rounds++) {
    ssize_t n = read(c, buf + have, sizeof buf - have - 1);
    if (n <= 0) return;
    if (body >= 0) {
      got += n;
      if (got >= body) return;
      continue;
    }
    have += (size_t)n;
    buf[have] = '\0';
    char *end = strstr(buf, "\r\n\r\n");
    if (!end) continue;
    const char *cl = strcasestr(buf, "content-length:");
    body = cl ? atoll(cl + 15) : 0;
    got = (long long)(have - (size_t)(end + 4 - buf));
    if (got >= body) return;
    have = 0;
  }
}

static void *serve(void *ud) {
  server *s = ud;
  for (size_t i = 0; s->answers[i]; i++) {
    int c = accept(s->fd, NULL, NULL);
    if (c < 0) return NULL;
    read_request(c);
    size_t len = s->sizes[i] ? s->sizes[i] : strlen(s->answers[i]);
    for (size_t done = 0; done < len;) {
      ssize_t n = write(c, s->answers[i] + done, len - done);
      if (n <= 0) break;
      done += (size_t)n;
    }
    close(c);
  }
  return NULL;
}

static int server_start(server *s, const char *const *answers) {
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0 };
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  s->answers = answers;
  s->fd = socket(AF_INET, SOCK_STREAM, 0);
  if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(s->fd, 8) != 0 ||
      getsockname(s->fd, (struct sockaddr *)&a, &len) != 0)
    return -1;
  s->port = ntohs(a.sin_port);
  return pthread_create(&s->thread, NULL, serve, s);
}

static void server_stop(server *s) {
  shutdown(s->fd, SHUT_RDWR);
  close(s->fd);
  pthread_join(s->thread, NULL);
}

/* A 503 or 200 with `n` bytes of `fill` as its body. */
static char *answer(int status, char fill, size_t n) {
  char *s = malloc(n + 128);
  int head = snprintf(s, 128, "HTTP/1.1 %d X\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                      status, n);
  memset(s + head, fill, n);
  s[head + n] = '\0';
  return s;
}

static luaretry_policy *policy(const char *src) {
  luaretry_policy *p = NULL;
  luaretry_policy_new(&p);
  if (!CHECK_CODE(luaretry_policy_load_string(p, "@io.lua", src), LUARETRY_OK))
    fprintf(stderr, "  %s\n", luaretry_policy_errmsg(p));
  return p;
}

/* ---- streaming */

typedef struct {
  size_t restarts, len, longest_seen;
  char last[256 * 1024];
} stream_sink;

static size_t on_bytes(void *ud, const char *data, size_t len) {
  stream_sink *s = ud;
  if (s->len + len <= sizeof s->last) memcpy(s->last + s->len, data, len);
  s->len += len;
  return len;
}

static int on_restart(void *ud) {
  stream_sink *s = ud;
  s->restarts++;
  s->len = 0;
  return 0;
}

static const char BODY_SEEN[] =
  "max_attempts = 3\ndeadline = 20\nbackoff = { initial = 0.01, jitter = 'none' }\n"
  "body_limit = 1000\n"
  "function is_transient(status, body, info)\n"
  "  if #body ~= 1000 then error('the script got ' .. #body .. ' bytes') end\n"
  "  return status == 503\n"
  "end\n"
  "function is_success(status, body) return status == 200 and #body == 1000 end\n";

static void test_streaming(void) {
  char *a503 = answer(503, 'A', 100000), *a200 = answer(200, 'B', 150000);
  const char *answers[] = { a503, a200, NULL };
  server s = { 0 };
  if (!CHECK(server_start(&s, answers) == 0)) return;
  luaretry_policy *p = policy(BODY_SEEN);
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/s", s.port);
  luaretry_request req = { .method = "GET", .url = url };
  static stream_sink sink;
  luaretry_curl_options o = { .sink = on_bytes, .sink_ud = &sink, .restart = on_restart };
  CURL *h = curl_easy_init();
  luaretry_decision d;
  CHECK_CODE(luaretry_curl_perform(p, c, h, &req, &o, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_SUCCESS);
  CHECK_EQ_INT(d.attempt, 2);
  CHECK_EQ_INT(sink.restarts, 2); /* before each attempt */
  CHECK_EQ_INT(sink.len, 150000); /* the last attempt's body, whole */
  CHECK(sink.last[0] == 'B' && sink.last[149999] == 'B');
  curl_easy_cleanup(h);
  luaretry_call_free(c);
  luaretry_policy_free(p);
  server_stop(&s);
  free(a503);
  free(a200);
}

/* ---- uploads through the host */

#define UPLOAD (3 * 1024 * 1024)

typedef struct {
  uint64_t bytes, starts; /* given in all; reads at offset 0 */
  uint64_t fail_after;    /* give nothing past this many bytes (0: never) */
} reader;

static size_t read_body(void *ud, uint64_t offset, char *buf, size_t len) {
  reader *r = ud;
  if (r->fail_after && r->bytes >= r->fail_after) return 0;
  if (offset == 0) r->starts++;
  for (size_t i = 0; i < len; i++) buf[i] = (char)('a' + (offset + i) % 26);
  r->bytes += len;
  return len;
}

static const char RETRY_POST[] =
  "max_attempts = 2\ndeadline = 20\nbackoff = { initial = 0.01, jitter = 'none' }\n"
  "function is_idempotent(r) return r.body_len == 3145728 and #r.body == 65536 end\n";

static void upload_once(reader *rd, luaretry_code want, int attempts) {
  char *a503 = answer(503, 'x', 10), *a200 = answer(200, 'y', 10);
  const char *answers[] = { a503, a200, NULL };
  server s = { 0 };
  if (!CHECK(server_start(&s, answers) == 0)) return;
  luaretry_policy *p = policy(RETRY_POST);
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
  char url[64], prefix[65536];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/u", s.port);
  read_body(&(reader){ 0 }, 0, prefix, sizeof prefix); /* what the script sees */
  luaretry_request req = { .method = "POST", .url = url, .body = prefix, .body_len = UPLOAD };
  luaretry_curl_options o = { .upload = read_body, .upload_ud = rd };
  CURL *h = curl_easy_init();
  luaretry_decision d;
  CHECK_CODE(luaretry_curl_perform(p, c, h, &req, &o, &d), want);
  if (want == LUARETRY_OK) CHECK_EQ_INT(d.attempt, attempts);
  curl_easy_cleanup(h);
  luaretry_call_free(c);
  luaretry_policy_free(p);
  shutdown(s.fd, SHUT_RDWR); /* the server may still wait for a second request */
  server_stop(&s);
  free(a503);
  free(a200);
}

static void test_upload(void) {
  reader rd = { 0 };
  upload_once(&rd, LUARETRY_OK, 2);
  CHECK_EQ_INT(rd.starts, 2); /* each attempt from the start */
  CHECK_EQ_INT(rd.bytes, 2 * (uint64_t)UPLOAD);
  reader failing = { .fail_after = 1024 * 1024 };
  upload_once(&failing, LUARETRY_E_OPERATION, 0);
}

/* ---- schemes */

static char seen_error[64], seen_detail[256];

static void observe(void *ud, const luaretry_outcome *o, const luaretry_decision *d) {
  (void)ud, (void)d;
  if (!o) return;
  snprintf(seen_error, sizeof seen_error, "%s", o->error ? o->error : "(none)");
  snprintf(seen_detail, sizeof seen_detail, "%s", o->error_detail ? o->error_detail : "(none)");
}

static void redirect_to(const char *location) {
  char head[256];
  snprintf(head, sizeof head,
           "HTTP/1.1 302 Found\r\nLocation: %s\r\nContent-Length: 0\r\n"
           "Connection: close\r\n\r\n",
           location);
  const char *answers[] = { head, NULL };
  server s = { 0 };
  if (!CHECK(server_start(&s, answers) == 0)) return;
  luaretry_policy *p = policy("max_attempts = 1\ndeadline = 20\n");
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
  luaretry_call_on_decision(c, observe, NULL);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/r", s.port);
  luaretry_request req = { .method = "GET", .url = url };
  static stream_sink sink;
  memset(&sink, 0, sizeof sink);
  luaretry_curl_options o = { .sink = on_bytes, .sink_ud = &sink, .restart = on_restart };
  CURL *h = curl_easy_init();
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L); /* the host asks for redirects */
  luaretry_decision d;
  CHECK_CODE(luaretry_curl_perform(p, c, h, &req, &o, &d), LUARETRY_OK);
  /* a failure, not the file; final, as the same answer leads there again */
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_FINAL);
  CHECK_EQ_INT(sink.len, 0);
  CHECK_EQ_STR(seen_error, "redirect_refused");
  CHECK_CONTAINS(seen_detail, "not supported or disabled");
  curl_easy_cleanup(h);
  luaretry_call_free(c);
  luaretry_policy_free(p);
  server_stop(&s);
}

static void test_schemes(void) {
  redirect_to("file:///etc/passwd");
  redirect_to("ftp://127.0.0.1/x");
  redirect_to("gopher://127.0.0.1/x");
}

/* ---- a compression bomb */

#define INFLATED ((size_t)256 * 1024 * 1024)

/* 256 MiB of zeros, gzipped by gzip(1) (in every Debian): about 256 KiB. */
static char *gzip_bomb(size_t *len) {
  FILE *p = popen("head -c 268435456 /dev/zero | gzip -c -9", "r");
  size_t cap = 1 << 20;
  char *buf = malloc(cap);
  *len = 0;
  if (!p || !buf) return NULL;
  for (size_t n; (n = fread(buf + *len, 1, cap - *len, p)) > 0 && *len + n < cap;) *len += n;
  pclose(p);
  return buf;
}

static void test_bomb(void) {
  size_t zlen = 0;
  char *z = gzip_bomb(&zlen);
  if (!CHECK(z && zlen > 1000 && zlen < 1024 * 1024)) return;
  char *resp = malloc(zlen + 256);
  int head = snprintf(resp, 256,
                      "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n"
                      "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                      zlen);
  memcpy(resp + head, z, zlen);
  const char *answers[] = { resp, NULL };
  server s = { .sizes = { (size_t)head + zlen } };
  if (!CHECK(server_start(&s, answers) == 0)) return;
  luaretry_policy *p = policy("max_attempts = 1\ndeadline = 60\n");
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/bomb", s.port);
  luaretry_request req = { .method = "GET", .url = url };
  static stream_sink sink;
  memset(&sink, 0, sizeof sink);
  luaretry_curl_options o = { .sink = on_bytes, .sink_ud = &sink, .restart = on_restart };
  CURL *h = curl_easy_init();
  curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, ""); /* the host asks curl to inflate */
  luaretry_decision d;
  CHECK_CODE(luaretry_curl_perform(p, c, h, &req, &o, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_SUCCESS);
  CHECK_EQ_INT(sink.len, INFLATED);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  CHECK(ru.ru_maxrss < 64 * 1024); /* KiB: the bomb never sat in memory */
#endif
  curl_easy_cleanup(h);
  luaretry_call_free(c);
  luaretry_policy_free(p);
  server_stop(&s);
  free(resp);
  free(z);
}

/* ---- resuming a download (luaretry_curl_resume) */

#define TRUNCATED_200 \
  "HTTP/1.1 200 OK\r\nAccept-Ranges: bytes\r\nETag: \"v1\"\r\nContent-Length: 10\r\n\r\n0123"

typedef struct {
  int notes;
  char last[300];
} notes;

static void on_note(void *ud, const char *line) {
  notes *n = ud;
  n->notes++;
  snprintf(n->last, sizeof n->last, "%s", line);
}

/* the script sees an error answer's body, which the sink never gets */
static const char RESUME_POLICY[] =
  "max_attempts = 3\ndeadline = 20\nbackoff = { initial = 0.01, jitter = 'none' }\n"
  "function is_transient(status, body)\n"
  "  if status == 503 and body ~= 'busy' then error('the script got ' .. body) end\n"
  "  return status == 503 or status == 0\n"
  "end\n";

/* Canned answers, the second (and the third, when given) to the resumed
 * request; what the sink ended with, its restarts, and the notes. */
static void resume_seq(const char *second, const char *third, uint64_t offset, const char *want,
                       size_t restarts, int want_notes) {
  const char *answers[] = { TRUNCATED_200, second, third, NULL };
  server s = { 0 };
  if (!CHECK(server_start(&s, answers) == 0)) return;
  luaretry_policy *p = policy(RESUME_POLICY);
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/f", s.port);
  luaretry_request req = { .method = "GET", .url = url };
  static stream_sink sink;
  memset(&sink, 0, sizeof sink);
  notes n = { 0 };
  luaretry_curl_resume r = { .offset = offset, .note = on_note, .note_ud = &n };
  luaretry_curl_options o = {
    .sink = on_bytes, .sink_ud = &sink, .restart = on_restart, .resume = &r
  };
  CURL *h = curl_easy_init();
  luaretry_decision d;
  CHECK_CODE(luaretry_curl_perform(p, c, h, &req, &o, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_SUCCESS);
  CHECK_EQ_INT(sink.len, strlen(want));
  CHECK(memcmp(sink.last, want, strlen(want)) == 0);
  CHECK_EQ_INT(sink.restarts, restarts);
  CHECK_EQ_INT(n.notes, want_notes);
  curl_easy_cleanup(h);
  luaretry_call_free(c);
  luaretry_policy_free(p);
  shutdown(s.fd, SHUT_RDWR);
  server_stop(&s);
}

static void resume_once(const char *second, uint64_t offset, const char *want, size_t restarts,
                        int want_notes) {
  resume_seq(second, NULL, offset, want, restarts, want_notes);
}

#define PART_4_9                                                     \
  "HTTP/1.1 206 Partial\r\nETag: \"v1\"\r\nAccept-Ranges: bytes\r\n" \
  "Content-Range: bytes 4-9/10\r\nContent-Length: 6\r\n\r\n456789"

static void test_resume(void) {
  /* a 206 that fits is appended: restart() only before the first attempt */
  resume_once(PART_4_9, 0, "0123456789", 1, 0);
  /* an error answer to the Range request (a load balancer's 503) is the
   * script's alone: the sink keeps its bytes, the next attempt asks for
   * the same range, and nothing restarts */
  resume_seq("HTTP/1.1 503 X\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbusy", PART_4_9, 0,
             "0123456789", 1, 0);
  /* a 200 (the resource changed) starts over, told once */
  resume_once("HTTP/1.1 200 OK\r\nETag: \"v2\"\r\nContent-Length: 10\r\n\r\nABCDEFGHIJ", 0,
              "ABCDEFGHIJ", 2, 1);
  /* the outcome of the truncated attempt says it is resumable; one without
   * a validator is not */
  luaretry_header hs[] = { { "accept-ranges", "bytes" }, { "etag", "\"v1\"" } };
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.error = "truncated";
  o.headers = hs;
  o.header_count = 2;
  CHECK(luaretry_curl_resumable(&o));
  hs[1].value = "W/\"v1\"";
  CHECK(!luaretry_curl_resumable(&o));
  o.error = NULL;
  hs[1].value = "\"v1\"";
  CHECK(!luaretry_curl_resumable(&o)); /* a complete answer: nothing to resume */
  /* a 206's Content-Range is proof of ranges (nginx sends no Accept-Ranges);
   * a 416's "bytes *" is not */
  o.error = "truncated";
  hs[0] = (luaretry_header){ "content-range", "bytes 50-99/100" };
  CHECK(luaretry_curl_resumable(&o));
  hs[0].value = "bytes */100";
  CHECK(!luaretry_curl_resumable(&o));
}

static void on_outcome(void *ud, const luaretry_outcome *o, const luaretry_decision *d) {
  (void)d;
  if (o && o->error) snprintf(ud, 64, "%s", o->error);
}

static void test_digest(void) {
  const char *answers[] = {
    "HTTP/1.1 200 OK\r\nContent-MD5: eB5eJF1ptWaXm4bijSPyxw==\r\nContent-Length: "
    "10\r\n\r\n0123456780",
    "HTTP/1.1 200 OK\r\nContent-MD5: eB5eJF1ptWaXm4bijSPyxw==\r\nContent-Length: "
    "10\r\n\r\n0123456789",
    NULL
  };
  server s = { 0 };
  if (!CHECK(server_start(&s, answers) == 0)) return;
  luaretry_policy *p = policy(RESUME_POLICY);
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
  char url[64], error[64] = "";
  snprintf(url, sizeof url, "http://127.0.0.1:%d/f", s.port);
  luaretry_call_on_decision(c, on_outcome, error);
  luaretry_request req = { .method = "GET", .url = url };
  static stream_sink sink;
  memset(&sink, 0, sizeof sink);
  /* no restart, no resume: the final body given whole, as a plain host */
  luaretry_curl_options o = { .sink = on_bytes, .sink_ud = &sink };
  CURL *h = curl_easy_init();
  luaretry_decision d;
  CHECK_CODE(luaretry_curl_perform(p, c, h, &req, &o, &d), LUARETRY_OK);
  CHECK_EQ_INT(d.reason, LUARETRY_REASON_SUCCESS);
  CHECK_EQ_INT(d.attempt, 2);
  CHECK(strcmp(error, "digest_mismatch") == 0);
  CHECK(sink.len == 10 && memcmp(sink.last, "0123456789", 10) == 0);
  luaretry_call_free(c);
  shutdown(s.fd, SHUT_RDWR);
  server_stop(&s);
  /* a checksum that is not one: refused before any request */
  luaretry_curl_resume r = { .checksum = "sha-256=nothex" };
  o.resume = &r;
  o.restart = on_restart;
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
  CHECK_CODE(luaretry_curl_perform(p, c, h, &req, &o, &d), LUARETRY_E_ARG);
  luaretry_call_free(c);
  curl_easy_cleanup(h);
  luaretry_policy_free(p);
}

/* ---- a call's own deadline: a listening socket that never accepts
 * (the kernel completes the connection; no answer ever comes) */

static void test_call_deadline(void) {
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0 };
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (!CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 8) == 0 &&
             getsockname(fd, (struct sockaddr *)&a, &len) == 0))
    return;
  luaretry_policy *p = policy(
    "deadline = 60\nattempt_timeout = 30\n"
    "backoff = { initial = 0.01, jitter = 'none' }\n");
  luaretry_call_options co = { .flags = LUARETRY_CALL_DEADLINE,
                               .deadline = luaretry_deadline_in(0.3) };
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, &co, &c), LUARETRY_OK);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/never", ntohs(a.sin_port));
  luaretry_request req = { .method = "GET", .url = url };
  CURL *h = curl_easy_init();
  luaretry_decision d;
  CHECK_CODE(luaretry_curl_perform(p, c, h, &req, NULL, &d), LUARETRY_OK);
  CHECK_EQ_STR(luaretry_reason_name(d.reason), "deadline");
  CHECK_EQ_INT(d.attempt, 1);
  CHECK(luaretry_call_elapsed(c) < 5); /* the call's 0.3 s, not the policy's 30 */
  curl_easy_cleanup(h);
  luaretry_call_free(c);
  /* a batch: each job with a deadline of its own (job.call) */
  luaretry_call_options own[2] = {
    { .flags = LUARETRY_CALL_DEADLINE, .deadline = luaretry_deadline_in(0.3) },
    { .flags = LUARETRY_CALL_DEADLINE, .deadline = luaretry_deadline_in(0.6) },
  };
  luaretry_curl_job jobs[2];
  memset(jobs, 0, sizeof jobs);
  for (int i = 0; i < 2; i++) {
    jobs[i].request = &req;
    jobs[i].call = &own[i];
  }
  luaretry_curl_many *m = NULL;
  CHECK_CODE(luaretry_curl_many_new(&m), LUARETRY_OK);
  luaretry_curl_many_options mo;
  luaretry_curl_many_options_init(&mo);
  mo.max_transfers = 2; /* side by side: each call begins at once */
  double t0 = luaretry_clock_now();
  CHECK_CODE(luaretry_curl_perform_many(m, p, jobs, 2, &mo), LUARETRY_OK);
  CHECK(luaretry_clock_now() - t0 < 5); /* the jobs' 0.3 and 0.6 s, not 30 */
  for (int i = 0; i < 2; i++) {
    CHECK_CODE(jobs[i].result.code, LUARETRY_OK);
    CHECK_EQ_STR(luaretry_reason_name(jobs[i].result.final.reason), "deadline");
  }
  /* job 1 ran to its own 0.6 s (an attempt's timeout never fires early),
   * not to job 0's 0.3 */
  CHECK(jobs[1].result.elapsed >= 0.55);
  luaretry_curl_many_free(m);
  luaretry_policy_free(p);
  close(fd);
}

/* ---- a job's max_body: a streamed body past it fails the attempt as
 * too_large, reported (judged by the policy), never the sink's */
static void test_max_body(void) {
  char *big = malloc(6000);
  if (!CHECK(big != NULL)) return;
  int head = snprintf(big, 100, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
  memset(big + head, 'x', 5000); /* no length stated: libcurl's own check cannot see it */
  big[head + 5000] = '\0';
  const char *const answers[] = { big, big, NULL };
  server srv;
  memset(&srv, 0, sizeof srv);
  if (!CHECK(server_start(&srv, answers) == 0)) return;
  luaretry_policy *p = policy(
    "max_attempts = 2\ndeadline = 20\nbackoff = { initial = 0.01, jitter = 'none' }\n"
    "function is_transient(status) return status == 0 end\n");
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/big", srv.port);
  luaretry_request req = { .method = "GET", .url = url };
  static stream_sink sink;
  luaretry_curl_job job;
  memset(&job, 0, sizeof job);
  job.request = &req;
  job.sink = on_bytes;
  job.restart = on_restart;
  job.sink_ud = &sink;
  job.max_body = 1000;
  luaretry_curl_many *m = NULL;
  CHECK_CODE(luaretry_curl_many_new(&m), LUARETRY_OK);
  CHECK_CODE(luaretry_curl_perform_many(m, p, &job, 1, NULL), LUARETRY_OK);
  CHECK_CODE(job.result.code, LUARETRY_OK); /* reported, not the host's stop */
  CHECK_EQ_STR(job.result.error ? job.result.error : "(none)", "too_large");
  CHECK_EQ_STR(luaretry_reason_name(job.result.final.reason), "exhausted");
  CHECK_EQ_INT(job.result.final.attempt, 2); /* the policy retried it */
  CHECK(sink.len <= 1000);
  luaretry_curl_many_free(m);
  luaretry_policy_free(p);
  server_stop(&srv);
  free(big);
}

/* ---- a sink that refuses the final body, given whole (no restart) */

static size_t refuse(void *ud, const char *data, size_t len) {
  (void)data, (void)len;
  (*(int *)ud)++;
  return 0; /* a full disk */
}

static char done_errmsg[4][256];

static void on_done(void *ud, size_t index, const luaretry_curl_job *job) {
  (void)ud;
  if (index < 4)
    snprintf(done_errmsg[index], sizeof done_errmsg[index], "%s",
             job->result.errmsg ? job->result.errmsg : "(none)");
}

#define OK_ABC "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc"

static void test_sink_refused(void) {
  const char *answers[] = { OK_ABC, OK_ABC, NULL };
  server s = { 0 };
  if (!CHECK(server_start(&s, answers) == 0)) return;
  luaretry_policy *p = policy("max_attempts = 3\ndeadline = 20\n");
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/ok", s.port);
  luaretry_request req = { .method = "GET", .url = url };
  int calls = 0;
  luaretry_curl_options o = { .sink = refuse, .sink_ud = &calls };
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
  CURL *h = curl_easy_init();
  luaretry_decision d;
  CHECK_CODE(luaretry_curl_perform(p, c, h, &req, &o, &d), LUARETRY_E_OPERATION);
  CHECK_EQ_INT(calls, 1);
  CHECK_CONTAINS(luaretry_call_errmsg(c), "the sink took 0 of the final body's 3 bytes");
  curl_easy_cleanup(h);
  luaretry_call_free(c);
  /* a batch: the job's result says so, and why */
  luaretry_curl_job job;
  memset(&job, 0, sizeof job);
  job.request = &req;
  job.sink = refuse;
  job.sink_ud = &calls;
  luaretry_curl_many *m = NULL;
  CHECK_CODE(luaretry_curl_many_new(&m), LUARETRY_OK);
  luaretry_curl_many_options mo;
  luaretry_curl_many_options_init(&mo);
  mo.done = on_done;
  CHECK_CODE(luaretry_curl_perform_many(m, p, &job, 1, &mo), LUARETRY_OK);
  CHECK_CODE(job.result.code, LUARETRY_E_OPERATION);
  CHECK_EQ_INT(calls, 2);
  CHECK_CONTAINS(done_errmsg[0], "sink took 0 of the final body's 3 bytes");
  luaretry_curl_many_free(m);
  luaretry_policy_free(p);
  server_stop(&s);
}

/* ---- what no attempt can send: refused before the first */

static int decisions;

static void count_decision(void *ud, const luaretry_outcome *o, const luaretry_decision *d) {
  (void)ud, (void)o, (void)d;
  decisions++;
}

/* req refused by luaretry_curl_perform: LUARETRY_E_ARG, no attempt made. */
static void refused(luaretry_policy *p, const luaretry_request *req, luaretry_upload_fn upload) {
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
  decisions = 0;
  luaretry_call_on_decision(c, count_decision, NULL);
  luaretry_curl_options o = { .upload = upload };
  CURL *h = curl_easy_init();
  luaretry_decision d;
  CHECK_CODE(luaretry_call_wait(c, NAN), LUARETRY_E_ARG); /* a failure before, its message */
  if (!CHECK_CODE(luaretry_curl_perform(p, c, h, req, &o, &d), LUARETRY_E_ARG))
    fprintf(stderr, "  %s %s\n", req->method ? req->method : "(no method)", req->url);
  CHECK_EQ_INT(decisions, 0);
  /* the refusal's own message, not the failure's before it */
  CHECK(luaretry_call_errmsg(c)[0] != '\0');
  if (!CHECK(strstr(luaretry_call_errmsg(c), "NaN") == NULL))
    fprintf(stderr, "  %s\n", luaretry_call_errmsg(c));
  curl_easy_cleanup(h);
  luaretry_call_free(c);
}

/* req performed: a success. */
static void allowed(luaretry_policy *p, const luaretry_request *req) {
  luaretry_call *c = NULL;
  CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
  CURL *h = curl_easy_init();
  luaretry_decision d;
  CHECK_CODE(luaretry_curl_perform(p, c, h, req, NULL, &d), LUARETRY_OK);
  if (!CHECK_EQ_INT(d.reason, LUARETRY_REASON_SUCCESS)) fprintf(stderr, "  %s\n", req->url);
  curl_easy_cleanup(h);
  luaretry_call_free(c);
}

/* A batch of `bad` (refused, never begun: its errmsg holds `why`) and a
 * job that can be sent at `url`, which goes on to its success. */
static void batch_refuses(luaretry_policy *p, const luaretry_request *bad, const char *url,
                          const char *why) {
  luaretry_request good = { .method = "GET", .url = url };
  luaretry_curl_job jobs[2];
  memset(jobs, 0, sizeof jobs);
  jobs[0].request = bad;
  jobs[1].request = &good;
  luaretry_curl_many *m = NULL;
  CHECK_CODE(luaretry_curl_many_new(&m), LUARETRY_OK);
  luaretry_curl_many_options mo;
  luaretry_curl_many_options_init(&mo);
  mo.done = on_done;
  CHECK_CODE(luaretry_curl_perform_many(m, p, jobs, 2, &mo), LUARETRY_OK);
  CHECK_CODE(jobs[0].result.code, LUARETRY_E_ARG);
  CHECK_EQ_INT(jobs[0].result.final.attempt, 0);
  CHECK_CONTAINS(done_errmsg[0], why);
  CHECK_CODE(jobs[1].result.code, LUARETRY_OK);
  CHECK_EQ_INT(jobs[1].result.final.reason, LUARETRY_REASON_SUCCESS);
  luaretry_curl_many_free(m);
}

static const char REFUSING[] =
  "max_attempts = 3\ndeadline = 20\nbackoff = { initial = 0.01, jitter = 'none' }\n";

/* A scheme that is not http or https: every attempt failed as "protocol",
 * and the policy retried it until it gave up. */
static void test_refused_scheme(void) {
  const char *answers[] = { OK_ABC, OK_ABC, OK_ABC, NULL };
  server s = { 0 };
  if (!CHECK(server_start(&s, answers) == 0)) return;
  luaretry_policy *p = policy(REFUSING);
  char url[64], upper[64], bare[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/ok", s.port);
  snprintf(upper, sizeof upper, "HTTP://127.0.0.1:%d/ok", s.port);
  snprintf(bare, sizeof bare, "127.0.0.1:%d/ok", s.port);
  refused(p, &(luaretry_request){ .method = "GET", .url = "file:///etc/hostname" }, NULL);
  refused(p, &(luaretry_request){ .method = "GET", .url = "htp://x" }, NULL);
  refused(p, &(luaretry_request){ .method = "GET", .url = "http://[::1" }, NULL);
  /* the scheme in any case, and a URL without one (curl makes it http://,
   * as the command does) */
  allowed(p, &(luaretry_request){ .url = upper });
  allowed(p, &(luaretry_request){ .url = bare });
  batch_refuses(p, &(luaretry_request){ .url = "file:///etc/hostname" }, url,
                "the scheme \"file\": only http and https");
  luaretry_policy_free(p);
  server_stop(&s);
}

/* A header or method that splits the request: a host's header value
 * "a\r\nX-Injected: 1" was sent as two headers. */
static void test_refused_split(void) {
  const char *answers[] = { OK_ABC, OK_ABC, OK_ABC, NULL };
  server s = { 0 };
  if (!CHECK(server_start(&s, answers) == 0)) return;
  luaretry_policy *p = policy(REFUSING);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/ok", s.port);
  luaretry_header split[] = { { "X-Inj", "a\r\nX-Injected: 1" } };
  refused(p, &(luaretry_request){ .url = url, .headers = split, .header_count = 1 }, NULL);
  luaretry_header lf[] = { { "X-Inj", "a\nb" } };
  refused(p, &(luaretry_request){ .url = url, .headers = lf, .header_count = 1 }, NULL);
  luaretry_header badname[] = { { "X-A : b", "1" } };
  refused(p, &(luaretry_request){ .url = url, .headers = badname, .header_count = 1 }, NULL);
  { /* a NULL URL: said on the call too */
    luaretry_call *c = NULL;
    CHECK_CODE(luaretry_call_begin(p, NULL, &c), LUARETRY_OK);
    CURL *h = curl_easy_init();
    luaretry_decision d;
    CHECK_CODE(luaretry_curl_perform(p, c, h, &(luaretry_request){ .method = "GET" }, NULL, &d),
               LUARETRY_E_ARG);
    CHECK_CONTAINS(luaretry_call_errmsg(c), "luaretry_curl_perform: req->url is NULL");
    curl_easy_cleanup(h);
    luaretry_call_free(c);
  }
  luaretry_header empty[] = { { "", "1" } };
  refused(p, &(luaretry_request){ .url = url, .headers = empty, .header_count = 1 }, NULL);
  refused(p, &(luaretry_request){ .method = "GET / HTTP/1.1\r\nX-Injected: 1\r\nX:", .url = url },
          NULL);
  /* an empty value, a removed header (curl's -H 'Accept:'), a tab */
  luaretry_header fine[] = { { "X-Empty", "" }, { "Accept", NULL }, { "X-Tab", "a\tb" } };
  allowed(p,
          &(luaretry_request){ .method = "GET", .url = url, .headers = fine, .header_count = 3 });
  batch_refuses(p, &(luaretry_request){ .url = url, .headers = split, .header_count = 1 }, url,
                "header \"X-Inj\": its value holds a line break");
  luaretry_policy_free(p);
  shutdown(s.fd, SHUT_RDWR); /* what was refused never came */
  server_stop(&s);
}

static size_t give_u(void *ud, uint64_t offset, char *buf, size_t len) {
  (void)ud, (void)offset;
  memset(buf, 'u', len);
  return len;
}

/* A body_len with no body (body NULL), with an upload function or
 * without: an empty body was sent, and the call went on as if it were the
 * request. */
static void test_refused_body(void) {
  const char *answers[] = { OK_ABC, OK_ABC, OK_ABC, NULL };
  server s = { 0 };
  if (!CHECK(server_start(&s, answers) == 0)) return;
  luaretry_policy *p = policy(REFUSING);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/ok", s.port);
  refused(p, &(luaretry_request){ .method = "PUT", .url = url, .body_len = 100 }, give_u);
  refused(p, &(luaretry_request){ .method = "PUT", .url = url, .body_len = 100 }, NULL);
  batch_refuses(p, &(luaretry_request){ .method = "PUT", .url = url, .body_len = 100 }, url,
                "a body_len of 100 and no body");
  luaretry_policy_free(p);
  shutdown(s.fd, SHUT_RDWR); /* what was refused never came */
  server_stop(&s);
}

int main(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  test_max_body();
  test_call_deadline();
  test_resume();
  test_digest();
  test_streaming();
  test_upload();
  test_schemes();
  test_bomb();
  test_sink_refused();
  test_refused_scheme();
  test_refused_split();
  test_refused_body();
  curl_global_cleanup();
  return check_done();
}
