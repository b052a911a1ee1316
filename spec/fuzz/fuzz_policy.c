/* fuzz_policy.c: a policy loaded from arbitrary bytes
 * (luaretry_policy_load_string), then, when it loads, a call of a few
 * attempts on the virtual clock with a fixed seed (is_idempotent, prepare
 * and a report of an outcome picked from the input's hash, a wait), a run
 * of its workflow through a canned transport, and a short simulation.
 * Limits are small so loops and bombs end fast: time_limit 0.05 s, 1 MiB
 * of memory, and for half the inputs an exact instruction limit.
 * Invariants: every function returns a luaretry_code; an error has a
 * message; a decision's numbers are finite and its reason consistent. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "luaretry.h"

#define ATTEMPTS 4

/* Keeps one sandbox alive between inputs, so the watchdog thread is not
 * started and joined (a 5 ms tick) for every input. */
static luaretry_policy *keeper;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  if (luaretry_policy_new(&keeper) != LUARETRY_OK ||
      luaretry_policy_load_string(keeper, "=keeper", "max_attempts = 1") != LUARETRY_OK)
    abort();
  return 0;
}

static uint64_t fnv(const uint8_t *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

static void check_code(luaretry_code rc, const char *msg) {
  if (rc > LUARETRY_E_SYSTEM) abort();
  if (rc != LUARETRY_OK && (!msg || strlen(msg) >= 4096)) abort();
}

static void check_decision(const luaretry_decision *d) {
  if (!isfinite(d->wait) || d->wait < 0 || !isfinite(d->next_timeout) || d->next_timeout < 0)
    abort();
  if (!isfinite(d->elapsed) || d->elapsed < 0) abort();
  if (d->reason > LUARETRY_REASON_RATE_LIMIT || d->wait_source > LUARETRY_WAIT_RATE) abort();
  /* no retry and no reason: only while other attempts of the call run */
  if (d->retry != (d->reason == LUARETRY_REASON_NONE) && !d->in_flight) abort();
  if (d->reason == LUARETRY_REASON_POLICY_ERROR && (!d->message || !d->rule)) abort();
}

static const luaretry_header HEADERS[] = {
  { "Retry-After", "2" },
  { "content-type", "text/plain" },
  { "X-RateLimit-Reset", "5" },
};

/* The outcome of attempt k, from the input's hash. */
static void outcome_of(uint64_t h, int k, luaretry_outcome *o) {
  static const int statuses[] = { 503, 200, 0, 429, 500, 404, 409, 302, 1, 137 };
  static const char *const errors[] = { "connect", "timeout", "reset", "dns", "tls_verify" };
  luaretry_outcome_init(o);
  unsigned x = (unsigned)(h >> (8 * (k % 8)));
  o->status = statuses[x % 10];
  o->kind = o->status < 100 && o->status ? LUARETRY_OUTCOME_COMMAND : LUARETRY_OUTCOME_HTTP;
  if (o->status == 0) o->error = errors[(x >> 4) % 5];
  o->body = x & 0x10 ? "{\"error\":{\"status\":\"UNAVAILABLE\"}} ABORTED" : "";
  o->body_len = strlen(o->body);
  o->headers = HEADERS;
  o->header_count = (x >> 5) % 4;
  o->retry_after = o->header_count ? 2 : -1;
  o->method = x & 0x100 ? "POST" : "GET";
  o->url = "https://example.com/x";
}

/* One attempt's request hooks; 0 when the call may go on. */
static int request_hooks(luaretry_call *c, int k) {
  luaretry_request in = { .method = k % 2 ? "PUT" : "GET",
                          .url = "https://example.com/x",
                          .headers = HEADERS,
                          .header_count = 2,
                          .body = "abc",
                          .body_len = 3 };
  int yes = 0;
  luaretry_code rc = luaretry_call_is_idempotent(c, &in, &yes);
  check_code(rc, luaretry_call_errmsg(c));
  luaretry_request out;
  rc = luaretry_call_prepare(c, &in, k, &out);
  check_code(rc, luaretry_call_errmsg(c));
  if (rc == LUARETRY_OK && (!out.url || (out.header_count && !out.headers))) abort();
  return rc == LUARETRY_OK ? 0 : -1;
}

static void one_call(luaretry_policy *p, uint64_t h) {
  luaretry_call_options o = { .flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME, .seed = h };
  luaretry_call *c;
  luaretry_code rc = luaretry_call_begin(p, &o, &c);
  check_code(rc, "begin");
  if (rc != LUARETRY_OK) return;
  for (int k = 1; k <= ATTEMPTS; k++) {
    luaretry_decision d;
    if (luaretry_call_next(c, &d) != LUARETRY_OK) abort();
    check_decision(&d);
    if (!d.retry || request_hooks(c, k) != 0) break;
    luaretry_outcome out;
    outcome_of(h, k, &out);
    rc = luaretry_call_report(c, &out, &d);
    check_code(rc, luaretry_call_errmsg(c));
    if (rc != LUARETRY_OK) break;
    check_decision(&d);
    if (!d.retry) break;
    if (luaretry_call_wait(c, d.wait) != LUARETRY_OK) abort();
  }
  luaretry_call_free(c);
}

static luaretry_code canned(void *ud, const luaretry_request *req, double timeout,
                            luaretry_response *resp) {
  (void)timeout;
  if (!req->url || !req->method) abort();
  resp->status = *(const int *)ud;
  resp->body = "{\"etag\":\"x\",\"bindings\":[]}";
  resp->body_len = strlen(resp->body);
  resp->headers = HEADERS;
  resp->header_count = 2;
  return LUARETRY_OK;
}

static void workflow(luaretry_policy *p, uint64_t h) {
  if (!luaretry_policy_has_workflow(p)) return;
  static const char *const args[] = { "https://example.com/a", "b" };
  int status = h % 2 ? 200 : 409;
  luaretry_outcome out;
  luaretry_code rc = luaretry_policy_run_workflow(p, args, 2, canned, &status, 1.0, &out);
  check_code(rc, luaretry_policy_errmsg(p));
  if (rc == LUARETRY_OK && (out.status < 0 || out.status > 999 || !out.body)) abort();
}

static int each(void *ud, const luaretry_decision *d) {
  (void)ud;
  check_decision(d);
  return 0;
}

static void log_line(void *ud, const char *line) {
  (void)ud;
  if (!line) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *src = malloc(size + 1);
  if (!src) return 0;
  memcpy(src, data, size);
  src[size] = '\0';
  uint64_t h = fnv(data, size);
  luaretry_policy *p;
  if (luaretry_policy_new(&p) != LUARETRY_OK) abort();
  luaretry_policy_on_log(p, log_line, NULL);
  if (luaretry_policy_set(p, "time_limit", "0.05") != LUARETRY_OK ||
      luaretry_policy_set(p, "memory_limit", "1048576") != LUARETRY_OK ||
      (h & 1 && luaretry_policy_set(p, "instruction_limit", "200000") != LUARETRY_OK))
    abort();
  luaretry_code rc = luaretry_policy_load_string(p, "=fuzz", src);
  check_code(rc, luaretry_policy_errmsg(p));
  if (rc == LUARETRY_OK) {
    luaretry_tuning t;
    if (luaretry_policy_tuning(p, &t) != LUARETRY_OK || !isfinite(t.max_retry_after)) abort();
    one_call(p, h);
    workflow(p, h);
    check_code(luaretry_simulate(p, h, 5, each, NULL), "simulate");
  }
  luaretry_policy_free(p);
  free(src);
  return 0;
}
