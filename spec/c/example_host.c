/* example_host.c: an event-loop host on the step API, as a proxy would
 * embed luaretry: ONE thread, one curl multi loop, 10,000 calls in flight
 * at once against the fault server, each retried by a policy.  It uses
 * the public headers only (luaretry.h, luaretry_curl.h): the step API
 * (begin, next, report, timeout, free), luaretry_retry_after for the
 * header it reads itself, luaretry_curl_error_name and
 * luaretry_curl_never_sent for what a transfer's result means.
 *
 * A call waiting for its retry holds no transfer and no Lua state: just
 * its luaretry_call and a place in the timer heap.  At most MAX_TRANSFERS
 * transfers run at once; the policy's waits are short so the run takes
 * seconds.  Every call must end with the verdict its path asks for:
 *   /ok/N     200                          -> success, 1 attempt
 *   /flaky/N  503, 503 (Retry-After: 0), 200 -> success, 3 attempts
 *   /gone/N   404                          -> final, 1 attempt
 *   /busy/N   503 forever                  -> exhausted, 4 attempts
 * Exit status 0 when all of them do. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "faults/faults.h"
#include "luaretry.h"
#include "luaretry_curl.h"

#define CALLS         10000
#define MAX_TRANSFERS 64

static const char SERVER[] =
  "respond = function (req)\n"
  "  local kind = req.path:match('^/(%a+)/')\n"
  "  if kind == 'ok' then return 200 end\n"
  "  if kind == 'gone' then return 404 end\n"
  "  if kind == 'busy' then return 503 end\n"
  "  if req.count < 3 then\n"
  "    return { status = 503, headers = { ['Retry-After'] = '0' } }\n"
  "  end\n"
  "  return 200\n"
  "end\n";

static const char POLICY[] =
  "name = 'example'\n"
  "max_attempts = 4\n"
  "deadline = 60\n"
  "attempt_timeout = 10\n"
  "backoff = { initial = 0.005, max = 0.02, jitter = 'full' }\n"
  "function is_transient(status, body, info)\n"
  "  return status == 0 or status == 503\n"
  "end\n";

static const char *const KINDS[] = { "ok", "flaky", "gone", "busy" };
static const char *const WANT[] = { "success", "success", "final", "exhausted" };
static const int WANT_ATTEMPTS[] = { 1, 3, 1, 4 };

typedef struct {
  luaretry_call *c;
  int kind;
  char url[96];
  CURL *h;            /* while in a transfer */
  double retry_after; /* of the last response; -1: none */
  int status;
  luaretry_reason reason;
  int attempts, done;
} host_call;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- a binary heap of calls by due time */

typedef struct {
  double due;
  int call;
} timer;
static timer heap[CALLS];
static int heap_len;

static void heap_push(double due, int call) {
  int i = heap_len++;
  heap[i] = (timer){ due, call };
  while (i > 0 && heap[(i - 1) / 2].due > heap[i].due) {
    timer t = heap[i];
    heap[i] = heap[(i - 1) / 2];
    heap[(i - 1) / 2] = t;
    i = (i - 1) / 2;
  }
}

static timer heap_pop(void) {
  timer top = heap[0];
  heap[0] = heap[--heap_len];
  for (int i = 0;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < heap_len && heap[l].due < heap[m].due) m = l;
    if (r < heap_len && heap[r].due < heap[m].due) m = r;
    if (m == i) break;
    timer t = heap[i];
    heap[i] = heap[m];
    heap[m] = t;
    i = m;
  }
  return top;
}

/* ---- transfers */

static size_t discard(char *data, size_t size, size_t n, void *ud) {
  (void)data;
  (void)ud;
  return size * n;
}

static size_t on_header(char *data, size_t size, size_t n, void *ud) {
  host_call *hc = ud;
  static const char name[] = "retry-after:";
  size_t len = size * n;
  if (len > sizeof name && strncasecmp(data, name, sizeof name - 1) == 0) {
    char value[128];
    size_t vlen =
      len - (sizeof name - 1) < sizeof value - 1 ? len - (sizeof name - 1) : sizeof value - 1;
    memcpy(value, data + sizeof name - 1, vlen);
    value[vlen] = '\0';
    value[strcspn(value, "\r\n")] = '\0';
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    hc->retry_after = luaretry_retry_after(value, (double)wall.tv_sec);
  }
  return len;
}

static CURL *spare[MAX_TRANSFERS];
static int spares, running;

static void start(CURLM *multi, host_call *hc) {
  CURL *h = spares ? spare[--spares] : curl_easy_init();
  curl_easy_reset(h);
  curl_easy_setopt(h, CURLOPT_URL, hc->url);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, hc);
  curl_easy_setopt(h, CURLOPT_PRIVATE, hc);
  long ms = (long)(luaretry_call_timeout(hc->c) * 1000);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms > 0 ? ms : 0L);
  hc->retry_after = -1;
  hc->h = h;
  curl_multi_add_handle(multi, h);
  running++;
}

/* A transfer ended: the outcome reported, the call scheduled or ended. */
static void ended(CURLM *multi, CURL *h, CURLcode res, host_call *calls, int *open_calls) {
  host_call *hc = NULL;
  curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&hc);
  curl_multi_remove_handle(multi, h);
  spare[spares++] = h;
  running--;
  long status = 0;
  if (res == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.status = (int)status;
  o.error = luaretry_curl_error_name(res);
  o.method = "GET";
  o.url = hc->url;
  o.retry_after = hc->retry_after;
  int idempotent = 1;
  luaretry_request r = { .method = "GET", .url = hc->url };
  luaretry_call_is_idempotent(hc->c, &r, &idempotent);
  o.not_repeatable = !idempotent && !luaretry_curl_never_sent(res);
  luaretry_decision d;
  hc->attempts++;
  if (luaretry_call_report(hc->c, &o, &d) != LUARETRY_OK || !d.retry) {
    hc->reason = d.reason;
    hc->done = 1;
    luaretry_call_free(hc->c);
    hc->c = NULL;
    (*open_calls)--;
    return;
  }
  heap_push(now() + d.wait, (int)(hc - calls));
}

/* The loop: start what is due while transfers are free, run curl, wait. */
static void run(CURLM *multi, host_call *calls) {
  int open_calls = CALLS;
  double limit = now() + 60;
  while (open_calls > 0 && now() < limit) {
    while (heap_len && heap[0].due <= now() && running < MAX_TRANSFERS) {
      host_call *hc = &calls[heap_pop().call];
      luaretry_decision d;
      if (luaretry_call_next(hc->c, &d) == LUARETRY_OK && d.retry) {
        start(multi, hc);
      } else {
        hc->reason = d.reason;
        hc->done = 1;
        luaretry_call_free(hc->c);
        hc->c = NULL;
        open_calls--;
      }
    }
    int still;
    curl_multi_perform(multi, &still);
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(multi, &left))) {
      if (msg->msg != CURLMSG_DONE) continue;
      ended(multi, msg->easy_handle, msg->data.result, calls, &open_calls);
    }
    int wait_ms = 100;
    if (heap_len && running < MAX_TRANSFERS) {
      double ms = (heap[0].due - now()) * 1000;
      wait_ms = ms < 0 ? 0 : ms < 100 ? (int)ms : 100;
    }
    curl_multi_poll(multi, NULL, 0, wait_ms, NULL);
  }
}

static int check(host_call *calls) {
  int wrong = 0;
  long verdicts[4] = { 0 };
  for (int i = 0; i < CALLS; i++) {
    host_call *hc = &calls[i];
    const char *got = hc->done ? luaretry_reason_name(hc->reason) : "(not finished)";
    if (!hc->done || strcmp(got, WANT[hc->kind]) != 0 || hc->attempts != WANT_ATTEMPTS[hc->kind]) {
      if (wrong++ < 10)
        fprintf(stderr, "example_host: %s ended %s after %d attempts, expected %s after %d\n",
                hc->url, got, hc->attempts, WANT[hc->kind], WANT_ATTEMPTS[hc->kind]);
    } else {
      verdicts[hc->kind]++;
    }
  }
  printf(
    "example_host: %d calls in flight on one thread: %ld success (1 attempt), %ld success "
    "(3 attempts), %ld final, %ld exhausted; %d wrong\n",
    CALLS, verdicts[0], verdicts[1], verdicts[2], verdicts[3], wrong);
  return wrong;
}

int main(void) {
  char err[256];
  lr_faults *server = lr_faults_start_string("example_server.lua", SERVER, NULL, err, sizeof err);
  if (!server) return fprintf(stderr, "example_host: %s\n", err), 1;
  luaretry_policy *p;
  luaretry_policy_new(&p);
  if (luaretry_policy_load_string(p, "=example", POLICY) != LUARETRY_OK)
    return fprintf(stderr, "example_host: %s\n", luaretry_policy_errmsg(p)), 1;
  static host_call calls[CALLS];
  double t0 = now();
  for (int i = 0; i < CALLS; i++) {
    calls[i].kind = i % 4;
    snprintf(calls[i].url, sizeof calls[i].url, "http://%s/%s/%d", lr_faults_address(server),
             KINDS[calls[i].kind], i);
    luaretry_call_options o;
    luaretry_call_options_init(&o);
    o.flags = LUARETRY_CALL_SEED;
    o.seed = (uint64_t)i;
    if (luaretry_call_begin(p, &o, &calls[i].c) != LUARETRY_OK) return 1;
    heap_push(t0, i);
  }
  CURLM *multi = curl_multi_init();
  curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)MAX_TRANSFERS);
  run(multi, calls);
  int wrong = check(calls);
  printf("example_host: %.2f s\n", now() - t0);
  for (int i = 0; i < CALLS; i++) luaretry_call_free(calls[i].c);
  for (int i = 0; i < spares; i++) curl_easy_cleanup(spare[i]);
  curl_multi_cleanup(multi);
  luaretry_policy_free(p);
  lr_faults_free(server);
  return wrong != 0;
}
