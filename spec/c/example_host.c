/* example_host.c: an event-loop host on the step API, as a proxy would
 * embed luaretry: ONE thread, one curl multi loop, 10,000 calls in flight
 * at once against the fault server, each retried by a policy; then calls
 * of a policy with a hedge, whose attempts get a second one beside them
 * when slow.  It uses the public headers only (luaretry.h,
 * luaretry_curl.h): the step API (begin, next, start, report_attempt,
 * hedge_in, hedge, timeout, free), luaretry_retry_after for the header it
 * reads itself, luaretry_curl_error_name and luaretry_curl_never_sent for
 * what a transfer's result means.
 *
 * A call waiting for its retry holds no transfer and no Lua state: just
 * its luaretry_call and a place in the timer heap.  At most MAX_TRANSFERS
 * transfers run at once; the policy's waits are short so the run takes
 * seconds.  Every call must end with the verdict its path asks for:
 *   /ok/N     200                          -> success, 1 attempt
 *   /flaky/N  503, 503 (Retry-After: 0), 200 -> success, 3 attempts
 *   /gone/N   404                          -> final, 1 attempt
 *   /busy/N   503 forever                  -> exhausted, 4 attempts
 *   /slow/N   200 after 5 s, then 200 at once (hedge.delay 0.05)
 *                                          -> success won by the hedge,
 *                                             2 attempts, the first cancelled
 *   /late/N   200 after 5 s, every time, for a call with a deadline of its
 *             own (the request it serves has 0.3 s left, and more for each
 *             later call: LUARETRY_CALL_DEADLINE), which comes long before
 *             the policy's 60 s: its attempt times out by it
 *                                          -> deadline, 1 attempt
 *
 * Hedging, as this loop runs it: after an attempt starts, a timer for
 * luaretry_call_hedge_in(); when it fires and the call still has the
 * attempt in flight, luaretry_call_hedge() may say "start attempt
 * d.attempt now" (d.retry) while the first keeps running.  Each transfer
 * that ends is reported with luaretry_call_report_attempt() under its own
 * attempt number; a decision that stops the call leaves d.in_flight
 * attempts running, which the host cancels (their transfers removed,
 * never reported).  Exit status 0 when every call ended as expected and
 * every /slow/ call was won by its hedge. */
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
#define HEDGED_CALLS  32  /* at most half the transfers: each hedge needs one free */
#define LATE_CALLS    32  /* calls with deadlines of their own */
#define LATE_LEFT     0.3 /* seconds call i has left: LATE_LEFT + i / 100 */
#define MAX_TRANSFERS 64
#define MAX_LIVE      2 /* a call's attempts in flight: the attempt and its hedge */

static const char SERVER[] =
  "respond = function (req)\n"
  "  local kind = req.path:match('^/(%a+)/')\n"
  "  if kind == 'ok' then return 200 end\n"
  "  if kind == 'gone' then return 404 end\n"
  "  if kind == 'busy' then return 503 end\n"
  "  if kind == 'slow' then return { delay = req.count == 1 and 5 or 0 } end\n"
  "  if kind == 'late' then return { delay = 5 } end\n"
  "  if req.count < 3 then\n"
  "    return { status = 503, headers = { ['Retry-After'] = '0' } }\n"
  "  end\n"
  "  return 200\n"
  "end\n";

#define POLICY_BODY                                              \
  "deadline = 60\n"                                              \
  "attempt_timeout = 10\n"                                       \
  "backoff = { initial = 0.005, max = 0.02, jitter = 'full' }\n" \
  "function is_transient(status, body, info)\n"                  \
  "  return status == 0 or status == 503\n"                      \
  "end\n"
static const char POLICY[] = "name = 'example'\nmax_attempts = 4\n" POLICY_BODY;
static const char HEDGE_POLICY[] =
  "name = 'example-hedge'\nmax_attempts = 3\n"
  /* share = 1: every slow call hedges (by default a tenth of them may) */
  "hedge = { delay = 0.05, max = 1, share = 1 }\n" POLICY_BODY;

static const char *const KINDS[] = { "ok", "flaky", "gone", "busy", "slow", "late" };
static const char *const WANT[] = { "success",   "success", "final",
                                    "exhausted", "success", "deadline" };
static const int WANT_ATTEMPTS[] = { 1, 3, 1, 4, 2, 1 };
#define SLOW 4
#define LATE 5

typedef struct host_call host_call;

/* One transfer: an attempt of a call, under its attempt number. */
typedef struct {
  CURL *h;
  host_call *hc;
  int id;             /* from luaretry_call_start or luaretry_call_hedge */
  double retry_after; /* of its response; -1: none */
} xfer;

struct host_call {
  luaretry_call *c;
  int kind;
  char url[96];
  xfer *live[MAX_LIVE]; /* its attempts in flight */
  int nlive;
  luaretry_reason reason;
  int attempts, done;
  int won_by_hedge; /* the decision that ended it judged a hedge */
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- a binary heap of timers: a call's next attempt, or its hedge */

enum { DUE_ATTEMPT, DUE_HEDGE };
typedef struct {
  double due;
  int call, what;
} timer;
static timer heap[2 * CALLS];
static int heap_len;

static void heap_push(double due, int call, int what) {
  if (heap_len == (int)(sizeof heap / sizeof heap[0])) {
    fprintf(stderr, "example_host: the timer heap is full\n");
    exit(1);
  }
  int i = heap_len++;
  heap[i] = (timer){ due, call, what };
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
  xfer *x = ud;
  static const char name[] = "retry-after:";
  size_t len = size * n;
  if (len > sizeof name && strncasecmp(data, name, sizeof name - 1) == 0) {
    char value[128];
    size_t vlen =
      len - (sizeof name - 1) < sizeof value - 1 ? len - (sizeof name - 1) : sizeof value - 1;
    memcpy(value, data + sizeof name - 1, vlen);
    value[vlen] = '\0';
    value[strcspn(value, "\r\n")] = '\0';
    if (luaretry_retry_after(value, 0, &x->retry_after) != LUARETRY_OK) x->retry_after = -1;
  }
  return len;
}

static xfer pool[MAX_TRANSFERS];
static xfer *spare[MAX_TRANSFERS];
static int spares, running;

/* Attempt `id` of hc, `timeout` seconds at most, beside any in flight;
 * a call that may hedge gets a timer for it. */
static void start(CURLM *multi, host_call *hc, int id, double timeout, host_call *calls) {
  xfer *x = spare[--spares];
  if (!x->h) x->h = curl_easy_init();
  curl_easy_reset(x->h);
  curl_easy_setopt(x->h, CURLOPT_URL, hc->url);
  curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, discard);
  curl_easy_setopt(x->h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(x->h, CURLOPT_HEADERDATA, x);
  curl_easy_setopt(x->h, CURLOPT_PRIVATE, x);
  /* rounded up: a timeout under a millisecond is not libcurl's 0, none */
  long ms = timeout > 0 ? (long)(timeout * 1000) + 1 : 0;
  curl_easy_setopt(x->h, CURLOPT_TIMEOUT_MS, ms);
  x->hc = hc;
  x->id = id;
  x->retry_after = -1;
  hc->live[hc->nlive++] = x;
  hc->attempts++;
  curl_multi_add_handle(multi, x->h);
  running++;
  double in = luaretry_call_hedge_in(hc->c); /* < 0: no hedge will be due */
  if (in >= 0) heap_push(now() + in, (int)(hc - calls), DUE_HEDGE);
}

/* The transfer's slot back; its call forgets it. */
static void stop_transfer(CURLM *multi, xfer *x) {
  host_call *hc = x->hc;
  curl_multi_remove_handle(multi, x->h);
  for (int i = 0; i < hc->nlive; i++)
    if (hc->live[i] == x) hc->live[i] = hc->live[--hc->nlive];
  spare[spares++] = x;
  running--;
}

static void finish(host_call *hc, const luaretry_decision *d, int *open_calls) {
  hc->reason = d->reason;
  hc->won_by_hedge = d->hedge;
  hc->done = 1;
  luaretry_call_free(hc->c);
  hc->c = NULL;
  (*open_calls)--;
}

/* A transfer ended: its outcome reported under its attempt number; the
 * call waits for its other attempts, is scheduled, or ends (the attempts
 * still in flight cancelled, never reported). */
static void ended(CURLM *multi, xfer *x, CURLcode res, host_call *calls, int *open_calls) {
  host_call *hc = x->hc;
  long status = 0;
  if (res == CURLE_OK) curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.status = (int)status;
  o.error = luaretry_curl_error_name(res);
  o.method = "GET";
  o.url = hc->url;
  o.retry_after = x->retry_after;
  int idempotent = 1;
  luaretry_request r = { .method = "GET", .url = hc->url };
  luaretry_call_is_idempotent(hc->c, &r, &idempotent);
  o.not_repeatable = !idempotent && !luaretry_curl_never_sent(res);
  int id = x->id;
  stop_transfer(multi, x);
  luaretry_decision d;
  if (luaretry_call_report_attempt(hc->c, id, &o, &d) != LUARETRY_OK) {
    d.reason = LUARETRY_REASON_POLICY_ERROR;
    d.hedge = 0;
  } else if (!d.retry && d.reason == LUARETRY_REASON_NONE) {
    return; /* failed while d.in_flight others go on: wait for them */
  } else if (d.retry) {
    heap_push(now() + d.wait, (int)(hc - calls), DUE_ATTEMPT);
    return;
  }
  while (hc->nlive) stop_transfer(multi, hc->live[0]); /* the losers */
  finish(hc, &d, open_calls);
}

/* A hedge timer fired: another attempt beside the one in flight, when the
 * call still has it and the policy allows one now. */
static void hedge_due(CURLM *multi, host_call *hc, host_call *calls) {
  if (!hc->c || hc->nlive == 0) return; /* the round is over */
  double in = luaretry_call_hedge_in(hc->c);
  if (in > 0) heap_push(now() + in, (int)(hc - calls), DUE_HEDGE);
  if (in != 0) return;
  luaretry_request r = { .method = "GET", .url = hc->url };
  luaretry_decision d;
  if (luaretry_call_hedge(hc->c, &r, &d) == LUARETRY_OK && d.retry)
    start(multi, hc, d.attempt, d.next_timeout, calls);
}

/* A retry (or first attempt) is due: ask next, then start it. */
static void attempt_due(CURLM *multi, host_call *hc, host_call *calls, int *open_calls) {
  luaretry_decision d;
  int id;
  if (luaretry_call_next(hc->c, &d) == LUARETRY_OK && d.retry &&
      luaretry_call_start(hc->c, &id) == LUARETRY_OK)
    start(multi, hc, id, d.next_timeout, calls);
  else
    finish(hc, &d, open_calls);
}

/* The loop: start what is due while transfers are free, run curl, wait. */
static void run(CURLM *multi, host_call *calls, int n) {
  int open_calls = n;
  double limit = now() + 60;
  while (open_calls > 0 && now() < limit) {
    while (heap_len && heap[0].due <= now() && running < MAX_TRANSFERS) {
      timer t = heap_pop();
      if (calls[t.call].done) continue;
      if (t.what == DUE_HEDGE)
        hedge_due(multi, &calls[t.call], calls);
      else
        attempt_due(multi, &calls[t.call], calls, &open_calls);
    }
    int still;
    curl_multi_perform(multi, &still);
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(multi, &left))) {
      if (msg->msg != CURLMSG_DONE) continue;
      xfer *x = NULL;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
      ended(multi, x, msg->data.result, calls, &open_calls);
    }
    int wait_ms = 100;
    if (heap_len && running < MAX_TRANSFERS) {
      double ms = (heap[0].due - now()) * 1000;
      wait_ms = ms < 0 ? 0 : ms < 100 ? (int)ms : 100;
    }
    curl_multi_poll(multi, NULL, 0, wait_ms, NULL);
  }
}

/* Every call as its path asks; a /slow/ call won by its hedge. */
static int check(host_call *calls, int n) {
  int wrong = 0;
  long verdicts[6] = { 0 };
  for (int i = 0; i < n; i++) {
    host_call *hc = &calls[i];
    const char *got = hc->done ? luaretry_reason_name(hc->reason) : "(not finished)";
    int hedge_ok = hc->won_by_hedge == (hc->kind == SLOW);
    if (!hc->done || strcmp(got, WANT[hc->kind]) != 0 || hc->attempts != WANT_ATTEMPTS[hc->kind] ||
        !hedge_ok) {
      if (wrong++ < 10)
        fprintf(stderr,
                "example_host: %s ended %s after %d attempts (%s), expected %s after %d (%s)\n",
                hc->url, got, hc->attempts, hc->won_by_hedge ? "won by a hedge" : "no hedge won",
                WANT[hc->kind], WANT_ATTEMPTS[hc->kind],
                hc->kind == SLOW ? "won by a hedge" : "no hedge");
    } else {
      verdicts[hc->kind]++;
    }
  }
  if (n == CALLS)
    printf(
      "example_host: %d calls in flight on one thread: %ld success (1 attempt), %ld success "
      "(3 attempts), %ld final, %ld exhausted; %d wrong\n",
      n, verdicts[0], verdicts[1], verdicts[2], verdicts[3], wrong);
  else if (calls[0].kind == LATE)
    printf("example_host: %d calls with deadlines of their own: %ld ended by them; %d wrong\n", n,
           verdicts[LATE], wrong);
  else
    printf("example_host: %d hedged calls: %ld won by their hedge; %d wrong\n", n, verdicts[SLOW],
           wrong);
  return wrong;
}

/* n calls of policy `source` on paths of kind `kind` (-1: the four in turn),
 * all run to their end in one loop; the number that ended wrong.  Kind
 * LATE: each call has a deadline of its own, as a proxy passes on the
 * deadline of the request it serves. */
static int phase(const char *address, const char *source, int kind, int n, host_call *calls,
                 luaretry_metrics *m) {
  luaretry_policy *p;
  luaretry_policy_new(&p);
  if (luaretry_policy_load_string(p, "=example", source) != LUARETRY_OK) {
    fprintf(stderr, "example_host: %s\n", luaretry_policy_errmsg(p));
    luaretry_policy_free(p);
    return 1;
  }
  double t0 = now();
  memset(calls, 0, (size_t)n * sizeof *calls);
  for (int i = 0; i < n; i++) {
    calls[i].kind = kind >= 0 ? kind : i % 4;
    snprintf(calls[i].url, sizeof calls[i].url, "http://%s/%s/%d", address, KINDS[calls[i].kind],
             i);
    luaretry_call_options o;
    luaretry_call_options_init(&o);
    o.flags = LUARETRY_CALL_SEED;
    o.seed = (uint64_t)i;
    if (kind == LATE) {
      o.flags |= LUARETRY_CALL_DEADLINE;
      o.deadline = luaretry_deadline_in(LATE_LEFT + i / 100.0);
    }
    if (luaretry_call_begin(p, &o, &calls[i].c) != LUARETRY_OK) {
      fprintf(stderr, "example_host: call %d did not begin\n", i);
      exit(1);
    }
    heap_push(t0, i, DUE_ATTEMPT);
  }
  CURLM *multi = curl_multi_init();
  curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)MAX_TRANSFERS);
  run(multi, calls, n);
  for (int i = 0; i < n; i++) /* a call the loop's time limit left unfinished */
    while (calls[i].nlive) stop_transfer(multi, calls[i].live[0]);
  int wrong = check(calls, n);
  printf("example_host: %.2f s\n", now() - t0);
  heap_len = 0;
  for (int i = 0; i < n; i++) luaretry_call_free(calls[i].c);
  curl_multi_cleanup(multi);
  luaretry_policy_metrics(p, m);
  luaretry_policy_free(p);
  return wrong;
}

int main(void) {
  char err[256];
  lr_faults *server = lr_faults_start_string("example_server.lua", SERVER, NULL, err, sizeof err);
  if (!server) return fprintf(stderr, "example_host: %s\n", err), 1;
  for (int i = 0; i < MAX_TRANSFERS; i++) spare[spares++] = &pool[i];
  static host_call calls[CALLS];
  luaretry_metrics m;
  int wrong = phase(lr_faults_address(server), POLICY, -1, CALLS, calls, &m);
  if (m.hedges)
    wrong++,
      fprintf(stderr, "example_host: %llu hedges without a hedge\n", (unsigned long long)m.hedges);
  wrong += phase(lr_faults_address(server), HEDGE_POLICY, SLOW, HEDGED_CALLS, calls, &m);
  /* each /slow/ call: one hedge sent, won, and its original cancelled */
  if (m.hedges != HEDGED_CALLS || m.hedges_won != HEDGED_CALLS ||
      m.hedges_cancelled != HEDGED_CALLS) {
    fprintf(stderr, "example_host: hedges %llu, won %llu, cancelled %llu; expected %d each\n",
            (unsigned long long)m.hedges, (unsigned long long)m.hedges_won,
            (unsigned long long)m.hedges_cancelled, HEDGED_CALLS);
    wrong++;
  }
  wrong += phase(lr_faults_address(server), POLICY, LATE, LATE_CALLS, calls, &m);
  for (int i = 0; i < MAX_TRANSFERS; i++)
    if (pool[i].h) curl_easy_cleanup(pool[i].h);
  lr_faults_free(server);
  return wrong != 0;
}
