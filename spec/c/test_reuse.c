/* test_reuse.c: connections outlive calls.  1,000 sequential
 * luaretry_curl_perform calls to a keep-alive server open ONE connection,
 * whether the host reuses its easy handle or makes a new one per call; the
 * fault server's request log numbers each request's connection, and this
 * reads it.  A retried attempt goes on the same connection too. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "faults/faults.h"
#include "luaretry.h"
#include "luaretry_curl.h"

#define CALLS 1000

static const char SERVER[] =
  "respond = routes{\n"
  "  ['/ok'] = 'fine\\n',\n"
  "  ['/flaky'] = sequence{503, 503, 'fine\\n'},\n"
  "}\n";

static const char POLICY[] =
  "max_attempts = 5\n"
  "deadline = 30\n"
  "attempt_timeout = 10\n"
  "backoff = { initial = 0.001, jitter = 'none' }\n";

typedef struct { char *data; size_t len; } text;

static size_t keep(char *data, size_t size, size_t n, void *ud) {
  text *t = ud;
  char *d = realloc(t->data, t->len + size * n + 1);
  if (!d) return 0;
  memcpy(d + t->len, data, size * n);
  t->data = d;
  t->len += size * n;
  t->data[t->len] = '\0';
  return size * n;
}

/* The distinct "conn" numbers in the server's log, and requests seen. */
static int connections(const char *address, int *requests) {
  char url[128];
  snprintf(url, sizeof url, "http://%s/_faults/requests", address);
  text t = { NULL, 0 };
  CURL *h = curl_easy_init();
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);  /* not one of the counted */
  curl_easy_perform(h);
  curl_easy_cleanup(h);
  long seen[16];
  int distinct = 0;
  *requests = 0;
  for (const char *at = t.data; at && (at = strstr(at, "\"conn\":")); at++) {
    long conn = strtol(at + 7, NULL, 10);
    (*requests)++;
    int known = 0;
    for (int i = 0; i < distinct; i++) known |= seen[i] == conn;
    if (!known && distinct < 16) seen[distinct++] = conn;
  }
  free(t.data);
  return distinct;
}

static void reset_log(const char *address) {
  char url[128];
  snprintf(url, sizeof url, "http://%s/_faults/reset", address);
  CURL *h = curl_easy_init();
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep);
  text t = { NULL, 0 };
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
  curl_easy_perform(h);
  curl_easy_cleanup(h);
  free(t.data);
}

/* CALLS sequential calls on `path`; a new easy handle each time, or one. */
static void calls(luaretry_policy *p, const char *address, const char *path, int fresh,
                  int want_attempts) {
  char url[128];
  snprintf(url, sizeof url, "http://%s%s", address, path);
  luaretry_request req = { .method = "GET", .url = url };
  CURL *h = fresh ? NULL : curl_easy_init();
  int ok = 0, n = strcmp(path, "/ok") == 0 ? CALLS : 1;
  for (int i = 0; i < n; i++) {
    if (fresh) h = curl_easy_init();
    luaretry_call *c = NULL;
    luaretry_decision d;
    if (luaretry_call_begin(p, NULL, &c) == LUARETRY_OK &&
        luaretry_curl_perform(p, c, h, &req, NULL, &d) == LUARETRY_OK &&
        d.reason == LUARETRY_REASON_SUCCESS && d.attempt == want_attempts)
      ok++;
    luaretry_call_free(c);
    if (fresh) curl_easy_cleanup(h);
  }
  if (!fresh) curl_easy_cleanup(h);
  CHECK_EQ_INT(ok, n);
}

int main(void) {
  char err[256];
  lr_faults *server = lr_faults_start_string("reuse.lua", SERVER, NULL, err, sizeof err);
  if (!CHECK(server != NULL)) return check_done();
  const char *address = lr_faults_address(server);
  luaretry_policy *p;
  luaretry_policy_new(&p);
  CHECK_CODE(luaretry_policy_load_string(p, "=reuse", POLICY), LUARETRY_OK);
  for (int fresh = 0; fresh <= 1; fresh++) {
    reset_log(address);
    calls(p, address, "/ok", fresh, 1);
    int requests, opened = connections(address, &requests);
    CHECK_EQ_INT(requests, CALLS);
    CHECK_EQ_INT(opened, 1);
    printf("test_reuse: %d calls, %s: %d connection(s)\n", CALLS,
           fresh ? "a new easy handle each" : "one easy handle", opened);
  }
  reset_log(address);
  calls(p, address, "/flaky", 0, 3);  /* its retries too */
  int requests, opened = connections(address, &requests);
  CHECK_EQ_INT(requests, 3);
  CHECK_EQ_INT(opened, 1);
  luaretry_policy_free(p);
  lr_faults_free(server);
  return check_done();
}
