/* hedge.c: what hedging does to the tail.  1,000 GETs through
 * luaretry_curl_perform against a fault server (in this process) that
 * answers in 10 ms, and in 1 s for a seeded 5% of the requests
 * (latency{"ok", base = 0.01, slow = 1, fraction = 0.05}), run by 20
 * threads at once: each call's latency, p50, p99 and p99.9, and the
 * requests the server saw, without a hedge and with hedge.delay = 0.05.
 * Goal: p99 <= 100 ms (about 1 s without) for <= 8% more requests.
 * Then an overload (every answer takes 0.2 s) with a budget
 * (max_tokens = 10, token_ratio = 0.1): hedges stop once the budget is
 * spent, so requests per call stay within its bound. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "faults/faults.h"
#include "faults_client.h"
#include "luaretry.h"
#include "luaretry_curl.h"

#define CALLS   1000
#define THREADS 20

static const char SERVER[] =
  "respond = routes{\n"
  "  ['/tail'] = latency{'ok', base = 0.01, slow = 1, fraction = 0.05, seed = 23},\n"
  "  ['/overload'] = latency{'ok', base = 0.2},\n"
  "  ['/fast'] = 'ok',\n"
  "}\n";
static const char POLICY[] =
  "max_attempts = 3\ndeadline = 30\nattempt_timeout = 10\n"
  "backoff = { initial = 0.01, jitter = 'none' }\n";

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t sink(void *ud, const char *data, size_t len) {
  (void)ud, (void)data;
  return len;
}

typedef struct {
  luaretry_policy *p;
  const char *url;
  int from, to; /* call indices of this thread */
  double *latency;
  int failed;
} worker;

static void *run_calls(void *arg) {
  worker *w = arg;
  luaretry_request req = { .method = "GET", .url = w->url };
  luaretry_curl_options o;
  luaretry_curl_options_init(&o);
  o.sink = sink;
  CURL *h = curl_easy_init();
  for (int i = w->from; i < w->to; i++) {
    luaretry_call *c = NULL;
    luaretry_decision d;
    double t0 = now();
    if (luaretry_call_begin(w->p, NULL, &c) != LUARETRY_OK ||
        luaretry_curl_perform(w->p, c, h, &req, &o, &d) != LUARETRY_OK ||
        d.reason != LUARETRY_REASON_SUCCESS)
      w->failed++;
    w->latency[i] = now() - t0;
    luaretry_call_free(c);
  }
  curl_easy_cleanup(h);
  return NULL;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* One run of `calls` calls on `path` with the policy's settings plus
 * `hedge` (NULL: none); prints its line, returns p99. */
static double run(const char *address, const char *path, int calls, const char *budget,
                  const char *hedge, const char *label) {
  luaretry_policy *p;
  luaretry_policy_new(&p);
  char src[512];
  snprintf(src, sizeof src, "%s%s", POLICY, budget ? budget : "");
  if (luaretry_policy_load_string(p, "=bench_hedge", src) != LUARETRY_OK ||
      (hedge && luaretry_policy_set(p, "hedge.delay", hedge) != LUARETRY_OK)) {
    fprintf(stderr, "bench_hedge: %s\n", luaretry_policy_errmsg(p));
    exit(1);
  }
  faults_reset(address);
  char url[160];
  snprintf(url, sizeof url, "http://%s%s", address, path);
  double *lat = calloc((size_t)calls, sizeof *lat);
  worker w[THREADS];
  pthread_t t[THREADS];
  double t0 = now();
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker){ p, url, calls * i / THREADS, calls * (i + 1) / THREADS, lat, 0 };
    pthread_create(&t[i], NULL, run_calls, &w[i]);
  }
  int failed = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(t[i], NULL);
    failed += w[i].failed;
  }
  double wall = now() - t0;
  qsort(lat, (size_t)calls, sizeof *lat, by_value);
  luaretry_metrics m;
  luaretry_policy_metrics(p, &m);
  int requests = 0;
  faults_connections(address, &requests);
  double p99 = lat[calls * 99 / 100 - 1];
  printf(
    "%-34s p50 %7.1f ms  p99 %7.1f ms  p99.9 %7.1f ms  requests %5d (%.3f per call, "
    "hedges %llu, won %llu)  failed %d  wall %.1f s\n",
    label, lat[calls / 2 - 1] * 1e3, p99 * 1e3, lat[calls * 999 / 1000 - 1] * 1e3, requests,
    (double)requests / calls, (unsigned long long)m.hedges, (unsigned long long)m.hedges_won,
    failed, wall);
  free(lat);
  luaretry_policy_free(p);
  return p99;
}

/* The hedged path's own cost: sequential calls on one thread against a
 * server that answers at once, so no hedge is ever due; us per call, best
 * of 7 runs of 1,000, with hedge.delay = `hedge` (NULL: none). */
static double sequential(const char *address, const char *hedge) {
  luaretry_policy *p;
  luaretry_policy_new(&p);
  luaretry_policy_load_string(p, "=bench_hedge", POLICY);
  if (hedge) luaretry_policy_set(p, "hedge.delay", hedge);
  char url[160];
  snprintf(url, sizeof url, "http://%s/fast", address);
  luaretry_request req = { .method = "GET", .url = url };
  luaretry_curl_options o;
  luaretry_curl_options_init(&o);
  o.sink = sink;
  CURL *h = curl_easy_init();
  double best = 1e9;
  for (int run = 0; run < 7; run++) {
    double t0 = now();
    for (int i = 0; i < 1000; i++) {
      luaretry_call *c = NULL;
      luaretry_decision d;
      if (luaretry_call_begin(p, NULL, &c) == LUARETRY_OK)
        luaretry_curl_perform(p, c, h, &req, &o, &d);
      luaretry_call_free(c);
    }
    double per = (now() - t0) * 1e3; /* us per call: ms for 1000 */
    if (per < best) best = per;
  }
  curl_easy_cleanup(h);
  luaretry_policy_free(p);
  return best;
}

int main(void) {
  char err[256];
  curl_global_init(CURL_GLOBAL_DEFAULT);
  lr_faults *server = lr_faults_start_string("bench_hedge.lua", SERVER, NULL, err, sizeof err);
  if (!server) {
    fprintf(stderr, "bench_hedge: %s\n", err);
    return 1;
  }
  const char *address = lr_faults_address(server);
  printf("bench_hedge: %d GETs, %d threads; 10 ms answers, 1 s for a seeded 5%%\n", CALLS, THREADS);
  run(address, "/tail", CALLS, NULL, NULL, "no hedge");
  double p99 = run(address, "/tail", CALLS, NULL, "0.05", "hedge.delay = 0.05");
  run(address, "/tail", CALLS, NULL, "p95", "hedge.delay = \"p95\"");
  printf("bench_hedge: goal p99 <= 100 ms with the hedge: %s\n", p99 <= 0.1 ? "met" : "MISSED");
  printf(
    "bench_hedge: an overload (every answer 0.2 s), 200 GETs, budget max_tokens 10, "
    "token_ratio 0.1\n");
  run(address, "/overload", 200, "budget = { max_tokens = 10, token_ratio = 0.1 }\n", NULL,
      "no hedge");
  run(address, "/overload", 200, "budget = { max_tokens = 10, token_ratio = 0.1 }\n", "0.05",
      "hedge.delay = 0.05, budget");
  double plain = sequential(address, NULL), hedged = sequential(address, "0.05");
  printf(
    "bench_hedge: a hedged call that needs no hedge (1,000 sequential GETs, one thread, "
    "best of 7): %.1f us per call, against %.1f us unhedged (%.2fx)\n",
    hedged, plain, hedged / plain);
  lr_faults_free(server);
  curl_global_cleanup();
  return 0;
}
