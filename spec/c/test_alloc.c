/* test_alloc.c: allocation failure, as Lua's testes/api.lua tests it.
 *
 * Linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,
 * --wrap=aligned_alloc (Makefile: the loads, the policies, the Lua states'
 * sandboxes and scripts are aligned to a cache line), so that in this test build the N-th allocation of an
 * operation fails, for N = 1, 2, ... until the operation runs without
 * meeting a failure.  The Lua states' memory comes through the sandbox's
 * allocator, which calls realloc, so Lua's own allocations fail too.  Two
 * modes: only the N-th allocation fails (Lua then collects and tries
 * again, so the paths after a retry are reached), and every allocation
 * from the N-th on fails (memory gone for good).
 *
 * Each step must end in a luaretry_code, or a decision with a reason:
 * never a crash or an abort (Lua's panic handler, for an allocation that
 * fails outside protection); under ASan (make test) never a leak; and
 * once failures stop, the same policy must work as it did. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "luaretry.h"
#include "check.h"

#define MAX_STEPS 100000L /* far more allocations than any operation makes */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
void *__real_aligned_alloc(size_t align, size_t n);

static struct {
  atomic_int armed;
  atomic_long count; /* allocations since armed */
  long fail_at;
  int sticky;         /* every allocation from fail_at on fails */
  atomic_long failed; /* failures injected since armed */
} inj;

static int should_fail(void) {
  if (!atomic_load_explicit(&inj.armed, memory_order_relaxed)) return 0;
  long n = atomic_fetch_add(&inj.count, 1) + 1;
  if (n == inj.fail_at || (inj.sticky && n > inj.fail_at)) {
    atomic_fetch_add(&inj.failed, 1);
    return 1;
  }
  return 0;
}

void *__wrap_malloc(size_t n) { return should_fail() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return should_fail() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return n && should_fail() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return should_fail() ? NULL : __real_strdup(s); }
void *__wrap_aligned_alloc(size_t align, size_t n) {
  return should_fail() ? NULL : __real_aligned_alloc(align, n);
}

static void arm(long fail_at, int sticky) {
  inj.fail_at = fail_at;
  inj.sticky = sticky;
  atomic_store(&inj.count, 0);
  atomic_store(&inj.failed, 0);
  atomic_store(&inj.armed, 1);
}

/* Disarms; whether a failure was injected. */
static int disarm(void) {
  atomic_store(&inj.armed, 0);
  return atomic_load(&inj.failed) > 0;
}

/* A policy that uses what a call can touch: require, options, info and
 * info.call (kept between decisions in C memory), headers, is_idempotent,
 * prepare, on_retry with print, the budget. */
static const char POLICY[] =
  "name = 'alloc'\n"
  "max_attempts = 6\n"
  "deadline = 60\n"
  "backoff = { initial = 0.1, max = 2, jitter = 'full' }\n"
  "budget = { max_tokens = 100, token_ratio = 0.1 }\n"
  "options = { marker = 'ABORTED' }\n"
  "local retry = require 'retry'\n"
  "local server_error = retry.status_range(500, 599)\n"
  "function is_transient(status, body, info)\n"
  "  local c = info.call\n"
  "  c.n = (c.n or 0) + 1\n"
  "  c.seen = c.seen or {}\n"
  "  c.seen[#c.seen + 1] = status .. ':' .. tostring(info.headers['retry-after'])\n"
  "  if body:find(options.marker, 1, true) then return 0.5 end\n"
  "  return status == 0 and info.error == 'connect' or server_error(status)\n"
  "end\n"
  "function is_idempotent(r) return r.method ~= 'POST' or r.headers['Idempotency-Key'] ~= nil end\n"
  "function prepare(r, attempt, info)\n"
  "  r.headers['Idempotency-Key'] = 'k-' .. tostring(info.call.n or 0)\n"
  "  r.headers['X-Attempt'] = tostring(attempt)\n"
  "end\n"
  "function on_retry(i) print(i.attempt, i.delay, i.status) end\n"
  "function run(http, args)\n"
  "  local r = http.get(args[1], { Accept = 'application/json' })\n"
  "  local doc = json.decode(r.body)\n"
  "  doc.seen = #args\n"
  "  local w = http.post(args[1], json.encode(doc))\n"
  "  return w.status, w.body\n"
  "end\n";

static void log_line(void *ud, const char *line) {
  (void)ud;
  (void)line;
}

/* The codes the operations returned and the reasons calls stopped for,
 * while failures were injected: printed with each operation's steps. */
static long codes[LUARETRY_E_SYSTEM + 1], reasons[LUARETRY_REASON_RATE_LIMIT + 1];

static int valid_code(luaretry_code rc) {
  if (rc < LUARETRY_OK || rc > LUARETRY_E_SYSTEM) return 0;
  codes[rc]++;
  return 1;
}

/* What running out of memory may say: LUARETRY_E_NOMEM (with or without
 * a message: luaretry_strerror says it), or, where C code the script
 * called ran out (prepare's copy, info.call's bytes), a policy error
 * saying so.  Never a syntax error, a bad argument or a script's fault. */
static int out_of_memory(const char *msg) { return !msg || strstr(msg, "out of memory"); }

static int clean(luaretry_code rc, const char *msg) {
  if (!valid_code(rc)) return 0;
  return rc == LUARETRY_OK || rc == LUARETRY_E_NOMEM ||
         (rc == LUARETRY_E_POLICY && msg && strstr(msg, "out of memory"));
}

/* What fails here is memory, never time: a busy machine (ASan, two cores
 * shared) must not stop a load by the 0.25 s time limit (final86: a
 * sticky failure's load of gcs.lua, slowed by Lua's emergency
 * collections, stopped by it).  The setting may itself run out of memory. */
static luaretry_code patient(luaretry_policy *p) {
  return luaretry_policy_set(p, "time_limit", "60");
}

/* ---- the operations: each returns 1 when it did all it should */

/* (a) A new policy, loaded. */
static int op_load(void *unused) {
  (void)unused;
  luaretry_policy *p = NULL;
  luaretry_code rc = luaretry_policy_new(&p);
  if (rc == LUARETRY_OK) rc = patient(p);
  if (rc == LUARETRY_OK) {
    luaretry_policy_on_log(p, log_line, NULL);
    rc = luaretry_policy_load_string(p, "@alloc.lua", POLICY);
  }
  CHECK(clean(rc, p ? luaretry_policy_errmsg(p) : NULL));
  luaretry_policy_free(p);
  return rc == LUARETRY_OK;
}

#ifndef LUARETRY_DATADIR
#define LUARETRY_DATADIR "."
#endif

/* (a') A shipped policy read from its file: 13 KB, so the reader grows
 * its buffer. */
static int op_load_file(void *unused) {
  (void)unused;
  luaretry_policy *p = NULL;
  luaretry_code rc = luaretry_policy_new(&p);
  if (rc == LUARETRY_OK) rc = patient(p);
  if (rc == LUARETRY_OK) rc = luaretry_policy_load_file(p, LUARETRY_DATADIR "/policies/gcs.lua");
  CHECK(clean(rc, p ? luaretry_policy_errmsg(p) : NULL));
  luaretry_policy_free(p);
  return rc == LUARETRY_OK;
}

static const luaretry_header RETRY_AFTER[] = { { "Retry-After", "1" } };

/* The outcome of attempt k of the call: 503 with Retry-After, a refused
 * connection, a 409 whose body the script reads, then 200. */
static void outcome(int k, luaretry_outcome *o) {
  luaretry_outcome_init(o);
  o->method = "POST";
  o->url = "https://example.com/x";
  switch (k) {
  case 1:
    o->status = 503;
    o->headers = RETRY_AFTER;
    o->header_count = 1;
    o->retry_after = 1;
    break;
  case 2:
    o->status = 0;
    o->error = "connect";
    break;
  case 3:
    o->status = 409;
    o->body = "ABORTED";
    o->body_len = 7;
    break;
  default:
    o->status = 200;
    o->body = "ok";
    o->body_len = 2;
    break;
  }
}

/* A decision of the call below while memory runs out: a retry, the
 * success, or a policy error that says memory ran out (or, when even the
 * message could not be made, says nothing). */
static int clean_decision(const luaretry_decision *d) {
  if (d->reason > LUARETRY_REASON_RATE_LIMIT) return 0;
  reasons[d->reason]++;
  if (d->retry != (d->reason == LUARETRY_REASON_NONE) || d->wait < 0) return 0;
  if (d->hook_error && !out_of_memory(d->hook_error)) return 0;
  return d->reason == LUARETRY_REASON_NONE || d->reason == LUARETRY_REASON_SUCCESS ||
         (d->reason == LUARETRY_REASON_POLICY_ERROR && out_of_memory(d->message));
}

/* One attempt's request hooks; 1 when both did their work. */
static int request_hooks(luaretry_call *c, int k) {
  luaretry_request in = {
    .method = "POST", .url = "https://example.com/x", .body = "{}", .body_len = 2
  };
  int yes = 0;
  luaretry_code rc = luaretry_call_is_idempotent(c, &in, &yes);
  CHECK(clean(rc, luaretry_call_errmsg(c)));
  if (rc != LUARETRY_OK) return 0;
  luaretry_request out;
  rc = luaretry_call_prepare(c, &in, k, &out);
  CHECK(clean(rc, luaretry_call_errmsg(c)));
  if (rc != LUARETRY_OK) return 0;
  return !yes && out.header_count == 2;
}

/* (b) A whole call: begin, attempts with is_idempotent, prepare and a
 * report, waits on the virtual clock, free.  Succeeds at attempt 4. */
static int op_call(void *policy) {
  luaretry_call_options o = { .flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME, .seed = 7 };
  luaretry_call *c;
  luaretry_code rc = luaretry_call_begin(policy, &o, &c);
  CHECK(clean(rc, NULL));
  if (rc != LUARETRY_OK) return 0;
  int all = 1;
  luaretry_decision d;
  for (int k = 1; k <= 6; k++) {
    CHECK_CODE(luaretry_call_next(c, &d), LUARETRY_OK);
    if (!d.retry) break;
    all &= request_hooks(c, k);
    luaretry_outcome out;
    outcome(k, &out);
    rc = luaretry_call_report(c, &out, &d);
    CHECK(clean(rc, luaretry_call_errmsg(c)) && clean_decision(&d));
    all &= rc == LUARETRY_OK && !d.hook_error;
    if (rc != LUARETRY_OK || !d.retry) break;
    CHECK_CODE(luaretry_call_wait(c, d.wait), LUARETRY_OK);
  }
  luaretry_call_free(c);
  return all && d.reason == LUARETRY_REASON_SUCCESS && d.attempt == 4;
}

/* (c) Settings changed on a loaded policy: a new load of its script (an
 * option's value copied for the policy, then for the load). */
static int op_set(void *policy) {
  luaretry_code rc = luaretry_policy_set(policy, "options.marker", "ABORTED");
  CHECK(clean(rc, luaretry_policy_errmsg(policy)));
  if (rc != LUARETRY_OK) return 0;
  rc = luaretry_policy_set(policy, "max_attempts", "5");
  CHECK(clean(rc, luaretry_policy_errmsg(policy)));
  if (rc == LUARETRY_OK) return luaretry_policy_set(policy, "max_attempts", "6") == LUARETRY_OK;
  return 0;
}

static luaretry_code canned(void *ud, const luaretry_request *req, double timeout,
                            luaretry_response *resp) {
  (void)ud;
  (void)req;
  (void)timeout;
  static const luaretry_header h[] = { { "content-type", "application/json" } };
  resp->status = 200;
  resp->body = "{\"etag\":\"e1\",\"bindings\":[{\"role\":\"r\"}]}";
  resp->body_len = strlen(resp->body);
  resp->headers = h;
  resp->header_count = 1;
  return LUARETRY_OK;
}

/* (d) The workflow once, json included, through a canned transport. */
static int op_workflow(void *policy) {
  static const char *const args[] = { "https://example.com/iam", "user:a" };
  luaretry_outcome out;
  luaretry_code rc = luaretry_policy_run_workflow(policy, args, 2, canned, NULL, 5, &out);
  CHECK(clean(rc, luaretry_policy_errmsg(policy)));
  return rc == LUARETRY_OK && out.status == 200;
}

/* ---- the loop */

static luaretry_policy *loaded(void) {
  luaretry_policy *p = NULL;
  if (!CHECK(luaretry_policy_new(&p) == LUARETRY_OK)) exit(1);
  luaretry_policy_on_log(p, log_line, NULL);
  CHECK_CODE(patient(p), LUARETRY_OK);
  if (!CHECK_CODE(luaretry_policy_load_string(p, "@alloc.lua", POLICY), LUARETRY_OK)) {
    fprintf(stderr, "%s\n", luaretry_policy_errmsg(p));
    exit(1);
  }
  return p;
}

typedef int (*operation)(void *);

/* Fails allocation N (and, sticky, every later one) for N = 1, 2, ...
 * until op meets no failure; each time on a fresh policy when `fresh`,
 * which must then work as before.  The number of steps. */
static long fail_each(const char *name, operation op, int fresh, int sticky) {
  long n;
  int broken = 0;
  for (n = 1; n <= MAX_STEPS; n++) {
    luaretry_policy *p = fresh ? loaded() : NULL;
    arm(n, sticky);
    int ok = op(p);
    int injected = disarm();
    if (!injected) {
      CHECK(ok); /* no failure met: the operation did all it should */
      luaretry_policy_free(p);
      break;
    }
    if (fresh && !op(p) && broken++ < 5) {
      CHECK(!"the policy no longer works after an allocation failed");
      fprintf(stderr, "  %s, allocation %ld%s: %s\n", name, n, sticky ? " on" : "",
              luaretry_policy_errmsg(p));
    }
    luaretry_policy_free(p);
  }
  CHECK(n <= MAX_STEPS);
  printf("%-8s %-6s %5ld steps: codes", name, sticky ? "sticky" : "one", n);
  for (int i = 0; i <= LUARETRY_E_SYSTEM; i++)
    if (codes[i]) printf(" %s %ld", luaretry_strerror((luaretry_code)i), codes[i]);
  printf("; decisions");
  for (int i = 0; i <= LUARETRY_REASON_RATE_LIMIT; i++)
    if (reasons[i]) printf(" %s %ld", luaretry_reason_name((luaretry_reason)i), reasons[i]);
  printf("\n");
  memset(codes, 0, sizeof codes);
  memset(reasons, 0, sizeof reasons);
  return n;
}

int main(void) {
  /* One policy alive throughout keeps the watchdog thread running: it is
   * joined (a 5 ms tick) when the last sandbox goes. */
  luaretry_policy *keeper = loaded();
  for (int sticky = 0; sticky <= 1; sticky++) {
    fail_each("load", op_load, 0, sticky);
    fail_each("file", op_load_file, 0, sticky);
    fail_each("call", op_call, 1, sticky);
    fail_each("set", op_set, 1, sticky);
    fail_each("workflow", op_workflow, 1, sticky);
  }
  luaretry_policy_free(keeper);
  return check_done();
}
