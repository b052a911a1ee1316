/* test_fork_curl.c: a fork's child and the curl helper's connections
 * (luaretry_curl.h, "Connections outlive calls").  The thread that forks
 * keeps a multi handle, and with it keep-alive connections, from a call
 * made before the fork: the child must not send on them (its request and
 * its parent's would share one socket, and each read the other's answer),
 * so its first call opens a connection of its own, and the parent's
 * connection serves the parent as before.  The fault server echoes each
 * request's X-Pid and numbers each request's connection. */
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "faults/faults.h"
#include "faults_client.h"
#include "luaretry.h"
#include "luaretry_curl.h"
#include "child_support.h"

#define CHILD_LIMIT_S 60 /* a child here ends in well under a second */
#define CHILDREN      3
#define CALLS         300 /* per process, side by side */

static const char SERVER[] =
  "function respond(req)\n"
  "  return { status = 200, body = 'pid=' .. (req.headers['x-pid'] or '?') }\n"
  "end\n";

static const char POLICY[] =
  "max_attempts = 3\n"
  "deadline = 30\n"
  "attempt_timeout = 10\n"
  "backoff = { initial = 0.001, jitter = 'none' }\n";

typedef struct {
  char b[64];
  size_t n;
} small_body;

static size_t keep(void *ud, const char *data, size_t n) {
  small_body *b = ud;
  size_t k = n < sizeof b->b - 1 - b->n ? n : sizeof b->b - 1 - b->n;
  memcpy(b->b + b->n, data, k);
  b->n += k;
  b->b[b->n] = '\0';
  return n;
}

/* n calls, a new easy handle each; how many came back with another
 * process's answer or failed (0: all right). */
static int calls(luaretry_policy *p, const char *address, int n) {
  char url[128], pid[32], want[48];
  snprintf(url, sizeof url, "http://%s/echo", address);
  snprintf(pid, sizeof pid, "%ld", (long)getpid());
  snprintf(want, sizeof want, "pid=%s", pid);
  luaretry_header hs[] = { { "X-Pid", pid } };
  luaretry_request req = { .method = "GET", .url = url, .headers = hs, .header_count = 1 };
  int wrong = 0;
  for (int i = 0; i < n; i++) {
    CURL *h = curl_easy_init();
    small_body b = { { 0 }, 0 };
    luaretry_curl_options o;
    luaretry_curl_options_init(&o);
    o.sink = keep;
    o.sink_ud = &b;
    luaretry_call *c = NULL;
    luaretry_decision d;
    if (!h || luaretry_call_begin(p, NULL, &c) != LUARETRY_OK ||
        luaretry_curl_perform(p, c, h, &req, &o, &d) != LUARETRY_OK ||
        d.reason != LUARETRY_REASON_SUCCESS || strcmp(b.b, want) != 0) {
      if (wrong++ < 3) fprintf(stderr, "  %s: got '%s'\n", pid, b.b);
    }
    luaretry_call_free(c);
    curl_easy_cleanup(h);
  }
  return wrong;
}

/* A child here is given CHILD_LIMIT_S (child_support.h). */
static int child_status(pid_t pid, const char *what) {
  return child_status_within(pid, what, CHILD_LIMIT_S);
}

/* One after the other, so nothing races: the parent's call opens a
 * connection, the child's three calls (after the parent's, on the thread
 * that forked) must open one of their own, and the parent's next call
 * reuses its own.  The old helper sent the child's on the parent's: one
 * connection in all. */
static void test_child_opens_its_own(luaretry_policy *p, const char *address) {
  CHECK_EQ_INT(calls(p, address, 1), 0);
  faults_reset(address);
  pid_t pid = fork();
  if (pid == 0) _exit(calls(p, address, 3) == 0 ? 0 : 1);
  CHECK(pid > 0 && child_status(pid, "the child's calls") == 0);
  CHECK_EQ_INT(calls(p, address, 1), 0);
  int requests, opened = faults_connections(address, &requests);
  CHECK_EQ_INT(requests, 4);
  CHECK_EQ_INT(opened, 2);
  printf("test_fork_curl: parent, child (3 calls), parent: %d connection(s)\n", opened);
}

/* Children and their parent call side by side, each reading only the
 * answers to its own requests. */
static void test_side_by_side(luaretry_policy *p, const char *address) {
  CHECK_EQ_INT(calls(p, address, 1), 0);
  pid_t kids[CHILDREN];
  for (int k = 0; k < CHILDREN; k++) {
    kids[k] = fork();
    if (kids[k] == 0) _exit(calls(p, address, CALLS) == 0 ? 0 : 1);
  }
  CHECK_EQ_INT(calls(p, address, CALLS), 0);
  for (int k = 0; k < CHILDREN; k++)
    CHECK(kids[k] > 0 && child_status(kids[k], "a child calling beside its parent") == 0);
}

int main(void) {
  curl_global_init(CURL_GLOBAL_ALL);
  char err[256];
  lr_faults *server = lr_faults_start_string("fork.lua", SERVER, NULL, err, sizeof err);
  if (!CHECK(server != NULL)) return check_done();
  const char *address = lr_faults_address(server);
  luaretry_policy *p = NULL;
  luaretry_policy_new(&p);
  CHECK_CODE(luaretry_policy_load_string(p, "=fork_curl", POLICY), LUARETRY_OK);
  test_child_opens_its_own(p, address);
  test_side_by_side(p, address);
  luaretry_policy_free(p);
  lr_faults_free(server);
  curl_global_cleanup();
  return check_done();
}
