/* reuse.c: what a call through luaretry_curl_perform costs next to the
 * plainest libcurl loop, on a keep-alive server.
 *
 *   baseline  one easy handle, curl_easy_perform 1,000 times (libcurl's
 *             own connection reuse);
 *   (1)       1,000 calls, each luaretry_call_begin + luaretry_curl_perform
 *             + luaretry_call_free, on one easy handle the host reuses;
 *   (2)       the same with a new easy handle per call.
 * Each figure is the best of 15 runs, interleaved (the VM is noisy: best
 * of 5 moved the ratio between 0.5x and 1.2x); each run's connections
 * are read from the fault server's request log (its "conn" numbers).  The
 * server runs in this process, on its own thread, for every line alike.
 * Target: (1) within 1.1x the baseline, and one connection for each.
 * Beside the wall time, this thread's CPU time per call (best run too):
 * the client's own work, without the waits for the server thread, whose
 * scheduling on a shared VM moves the wall time by tens of percent. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "faults/faults.h"
#include "faults_client.h"
#include "luaretry.h"
#include "luaretry_curl.h"

#define CALLS  1000
#define RUNS   15
#define TARGET 1.1

static const char SERVER[] = "respond = routes{ ['/ok'] = 'fine\\n' }\n";
static const char POLICY[] =
  "max_attempts = 3\ndeadline = 30\nattempt_timeout = 10\n"
  "backoff = { initial = 0.001, jitter = 'none' }\n";

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t discard(char *data, size_t size, size_t n, void *ud) {
  (void)data, (void)ud;
  return size * n;
}

static size_t sink(void *ud, const char *data, size_t len) {
  (void)ud, (void)data;
  return len;
}

typedef struct {
  const char *name;
  double best;     /* seconds per call, best run */
  double best_cpu; /* this thread's CPU seconds per call, best run */
  int connections; /* most seen in one run */
  int failures;
} line;

static int bare(const char *url) {
  CURL *h = curl_easy_init();
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
  int failures = 0;
  for (int i = 0; i < CALLS; i++) {
    long code = 0;
    if (curl_easy_perform(h) != CURLE_OK ||
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK || code != 200)
      failures++;
  }
  curl_easy_cleanup(h);
  return failures;
}

static int calls(luaretry_policy *p, const char *url, int fresh) {
  luaretry_request req = { .method = "GET", .url = url };
  luaretry_curl_options o;
  luaretry_curl_options_init(&o);
  o.sink = sink;
  CURL *h = fresh ? NULL : curl_easy_init();
  int failures = 0;
  for (int i = 0; i < CALLS; i++) {
    if (fresh) h = curl_easy_init();
    luaretry_call *c = NULL;
    luaretry_decision d;
    if (luaretry_call_begin(p, NULL, &c) != LUARETRY_OK ||
        luaretry_curl_perform(p, c, h, &req, &o, &d) != LUARETRY_OK ||
        d.reason != LUARETRY_REASON_SUCCESS)
      failures++;
    luaretry_call_free(c);
    if (fresh) curl_easy_cleanup(h);
  }
  if (!fresh) curl_easy_cleanup(h);
  return failures;
}

static void measure(line *l, int which, luaretry_policy *p, const char *address, const char *url) {
  faults_reset(address);
  double t0 = now(), c0 = cpu_now();
  int failures = which == 0 ? bare(url) : calls(p, url, which == 2);
  double per_call = (now() - t0) / CALLS, cpu_per_call = (cpu_now() - c0) / CALLS;
  if (cpu_per_call < l->best_cpu) l->best_cpu = cpu_per_call;
  int requests, opened = faults_connections(address, &requests);
  if (per_call < l->best) l->best = per_call;
  if (opened > l->connections) l->connections = opened;
  l->failures += failures + (requests != CALLS);
}

int main(void) {
  char err[256];
  curl_global_init(CURL_GLOBAL_DEFAULT);
  lr_faults *server = lr_faults_start_string("reuse.lua", SERVER, NULL, err, sizeof err);
  if (!server) {
    fprintf(stderr, "bench reuse: %s\n", err);
    return 1;
  }
  const char *address = lr_faults_address(server);
  char url[128];
  snprintf(url, sizeof url, "http://%s/ok", address);
  luaretry_policy *p;
  luaretry_policy_new(&p);
  if (luaretry_policy_load_string(p, "=reuse", POLICY) != LUARETRY_OK) {
    fprintf(stderr, "bench reuse: %s\n", luaretry_policy_errmsg(p));
    return 1;
  }
  line lines[3] = {
    { "baseline: curl_easy_perform, one handle", 1e9, 1e9, 0, 0 },
    { "(1) luaretry_curl_perform, one handle", 1e9, 1e9, 0, 0 },
    { "(2) luaretry_curl_perform, new handle each", 1e9, 1e9, 0, 0 },
  };
  for (int run = 0; run < RUNS; run++)
    for (int which = 0; which < 3; which++) measure(&lines[which], which, p, address, url);

  double load[1] = { -1 }; /* the machine is shared: how busy it was */
  getloadavg(load, 1);
  printf(
    "\nluaretry %s bench: reuse   %d sequential calls to a keep-alive server "
    "(127.0.0.1), best of %d runs, load %.2f\n\n",
    luaretry_version(NULL), CALLS, RUNS, load[0]);
  printf("%-46s %12s %8s %12s %8s %12s\n", "figure", "per call", "x base", "CPU per call", "x base",
         "connections");
  for (int i = 0; i < 3; i++)
    printf("%-46s %9.1f us %7.2fx %9.1f us %7.2fx %12d%s\n", lines[i].name, lines[i].best * 1e6,
           lines[i].best / lines[0].best, lines[i].best_cpu * 1e6,
           lines[i].best_cpu / lines[0].best_cpu, lines[i].connections,
           lines[i].failures ? "  (FAILURES)" : "");
  double ratio = lines[1].best / lines[0].best;
  printf("target: (1) at most %.2fx the baseline: %s; one connection per run: %s\n", TARGET,
         ratio <= TARGET ? "met" : "MISSED",
         lines[1].connections == 1 && lines[2].connections == 1 ? "met" : "MISSED");
  luaretry_policy_free(p);
  lr_faults_free(server);
  curl_global_cleanup();
  return lines[0].failures + lines[1].failures + lines[2].failures ? 1 : 0;
}
