/* hedge.c: what hedging does to the tail.  1,000 GETs through
 * luaretry_curl_perform against a fault server (in this process) that
 * answers in 10 ms, and in 1 s for a seeded 5% of the requests
 * (latency{"ok", base = 0.01, slow = 1, fraction = 0.05}), run by 20
 * threads at once: each call's latency, p50, p99 and p99.9, and the
 * requests the server saw, without a hedge and with hedge.delay = 0.05.
 * Goal: p99 <= 100 ms (about 1 s without) for <= 8% more requests.
 * Then an overload (every answer takes 0.2 s) with a budget
 * (max_tokens = 10, token_ratio = 0.1): hedges stop once the budget is
 * spent, so requests per call stay within its bound.  Last, the hedged
 * path's own cost beside an unhedged call (`bench_hedge --cost`: that part
 * alone). */
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
 * server that answers at once, so no hedge is ever due: 1,000 calls a run
 * with hedge.delay = 0.05 against 1,000 without, on one easy handle each,
 * runs interleaved (a noisy neighbour hurts both alike), best of
 * SEQ_RUNS; us per call. */
#define SEQ_RUNS  15
#define SEQ_CALLS 1000

typedef struct {
  luaretry_policy *p;
  CURL *h;
  double best; /* seconds per call */
  int failed, hedges;
} seq_line;

static void seq_open(seq_line *l, const char *hedge) {
  luaretry_policy_new(&l->p);
  if (luaretry_policy_load_string(l->p, "=bench_hedge", POLICY) != LUARETRY_OK ||
      (hedge && luaretry_policy_set(l->p, "hedge.delay", hedge) != LUARETRY_OK)) {
    fprintf(stderr, "bench_hedge: %s\n", luaretry_policy_errmsg(l->p));
    exit(1);
  }
  l->h = curl_easy_init();
  l->best = 1e9;
  l->failed = 0;
}

static void seq_run(seq_line *l, const char *url) {
  luaretry_request req = { .method = "GET", .url = url };
  luaretry_curl_options o;
  luaretry_curl_options_init(&o);
  o.sink = sink;
  double t0 = now();
  for (int i = 0; i < SEQ_CALLS; i++) {
    luaretry_call *c = NULL;
    luaretry_decision d;
    if (luaretry_call_begin(l->p, NULL, &c) != LUARETRY_OK ||
        luaretry_curl_perform(l->p, c, l->h, &req, &o, &d) != LUARETRY_OK ||
        d.reason != LUARETRY_REASON_SUCCESS)
      l->failed++;
    luaretry_call_free(c);
  }
  double per = (now() - t0) / SEQ_CALLS;
  if (per < l->best) l->best = per;
}

static void sequential(const char *address) {
  char url[160];
  snprintf(url, sizeof url, "http://%s/fast", address);
  seq_line plain, hedged;
  seq_open(&plain, NULL);
  seq_open(&hedged, "0.05");
  for (int run = 0; run < SEQ_RUNS; run++) {
    seq_run(&plain, url);
    seq_run(&hedged, url);
  }
  luaretry_metrics m;
  luaretry_policy_metrics(hedged.p, &m);
  printf(
    "bench_hedge: the hedged path's own cost, %d sequential GETs a run on one thread, "
    "answered at once (no hedge due), best of %d interleaved runs\n",
    SEQ_CALLS, SEQ_RUNS);
  printf("  %-44s %8.1f us per call   1.00x%s\n", "baseline: unhedged call", plain.best * 1e6,
         plain.failed ? "  (FAILURES)" : "");
  printf("  %-44s %8.1f us per call   %.2fx%s (hedges sent %llu)\n",
         "hedge.delay = 0.05, no hedge needed", hedged.best * 1e6, hedged.best / plain.best,
         hedged.failed ? "  (FAILURES)" : "", (unsigned long long)m.hedges);
  curl_easy_cleanup(plain.h);
  curl_easy_cleanup(hedged.h);
  luaretry_policy_free(plain.p);
  luaretry_policy_free(hedged.p);
}

int main(int argc, char **argv) {
  int cost_only = argc > 1 && strcmp(argv[1], "--cost") == 0; /* the last part alone */
  char err[256];
  curl_global_init(CURL_GLOBAL_DEFAULT);
  lr_faults *server = lr_faults_start_string("bench_hedge.lua", SERVER, NULL, err, sizeof err);
  if (!server) {
    fprintf(stderr, "bench_hedge: %s\n", err);
    return 1;
  }
  const char *address = lr_faults_address(server);
  if (cost_only) {
    sequential(address);
    lr_faults_free(server);
    curl_global_cleanup();
    return 0;
  }
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
  sequential(address);
  lr_faults_free(server);
  curl_global_cleanup();
  return 0;
}
