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
#include "faults_client.h"
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

/* A host with its own connection cache (a CURLSH sharing connections)
 * hands it in on its handles: luaretry's calls and the host's own
 * transfers then draw on that one cache. */
static void host_cache(luaretry_policy *p, const char *address) {
  char url[128];
  snprintf(url, sizeof url, "http://%s/ok", address);
  CURLSH *share = curl_share_init();
  curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
  CURL *mine = curl_easy_init(), *for_calls = curl_easy_init();
  curl_easy_setopt(mine, CURLOPT_SHARE, share);
  curl_easy_setopt(for_calls, CURLOPT_SHARE, share);
  curl_easy_setopt(mine, CURLOPT_URL, url);
  curl_easy_setopt(mine, CURLOPT_WRITEFUNCTION, faults_keep);
  faults_text body = { NULL, 0 };
  curl_easy_setopt(mine, CURLOPT_WRITEDATA, &body);
  luaretry_request req = { .method = "GET", .url = url };
  int ok = 0;
  for (int i = 0; i < 10; i++) {
    ok += curl_easy_perform(mine) == CURLE_OK; /* the host's own transfer */
    luaretry_call *c = NULL;
    luaretry_decision d;
    if (luaretry_call_begin(p, NULL, &c) == LUARETRY_OK &&
        luaretry_curl_perform(p, c, for_calls, &req, NULL, &d) == LUARETRY_OK &&
        d.reason == LUARETRY_REASON_SUCCESS)
      ok++;
    luaretry_call_free(c);
  }
  CHECK_EQ_INT(ok, 20);
  curl_easy_cleanup(mine);
  curl_easy_cleanup(for_calls);
  curl_share_cleanup(share);
  free(body.data);
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
    faults_reset(address);
    calls(p, address, "/ok", fresh, 1);
    int requests, opened = faults_connections(address, &requests);
    CHECK_EQ_INT(requests, CALLS);
    CHECK_EQ_INT(opened, 1);
    printf("test_reuse: %d calls, %s: %d connection(s)\n", CALLS,
           fresh ? "a new easy handle each" : "one easy handle", opened);
  }
  faults_reset(address);
  calls(p, address, "/flaky", 0, 3); /* its retries too */
  int requests, opened = faults_connections(address, &requests);
  CHECK_EQ_INT(requests, 3);
  CHECK_EQ_INT(opened, 1);
  faults_reset(address);
  host_cache(p, address);
  opened = faults_connections(address, &requests);
  CHECK_EQ_INT(requests, 20);
  CHECK_EQ_INT(opened, 1);
  printf("test_reuse: the host's CURLSH, its transfers and 10 calls: %d connection(s)\n", opened);
  luaretry_policy_free(p);
  lr_faults_free(server);
  return check_done();
}
