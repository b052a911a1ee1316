/* loop.c: luaretry's side of spec/bench/peers.sh, the "fail k times, then
 * succeed, no wait" loop.
 *
 * Each call is the blocking luaretry_call_run with an operation that answers
 * 503 three times, then 200 (no body).  The policy is policies/http.lua (its
 * Lua is_transient judges every 503) with backoff.initial=0 and
 * backoff.jitter=none, so every wait is 0, and budget=none: every call
 * fails three times, which a retry budget is there to refuse after a few
 * calls (10 tokens, 0.1 back per success), and the peers have none.  It
 * is loaded once, as a peer's retry object is made once.  Each call is begun, run and freed: that is
 * what one retried operation costs a user.
 *
 *   virtual  LUARETRY_CALL_VIRTUAL_TIME with a fixed seed
 *   real     luaretry_call_begin's defaults: the real clock, seeded from the
 *            OS (a zero wait makes no syscall, but begin opens an eventfd
 *            for cancel and reads getrandom, and free closes the eventfd)
 *
 * Usage: bench_loop [SECONDS]   (default 0.25: the length of each timed run)
 * Prints, one line per row: NAME NS_PER_ATTEMPT CALLS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "luaretry.h"

#ifndef LUARETRY_DATADIR
#define LUARETRY_DATADIR "."
#endif

#define K 3 /* failures before the success */

static void die(const char *what, const char *detail) {
  fprintf(stderr, "bench_loop: %s: %s\n", what, detail);
  exit(1);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
  long attempts;
} op_state;

static luaretry_code op(void *ud, luaretry_call *c, int attempt, double timeout,
                        luaretry_outcome *out) {
  (void)c;
  (void)timeout;
  op_state *s = ud;
  s->attempts++;
  out->status = attempt <= K ? 503 : 200;
  out->method = "GET";
  out->url = "http://service.invalid/v1/items";
  return LUARETRY_OK;
}

/* n calls; ns per attempt. */
static double run(luaretry_policy *p, int is_virtual, long n) {
  luaretry_call_options opt;
  luaretry_call_options_init(&opt);
  if (is_virtual) {
    opt.flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME;
    opt.seed = 1;
  }
  op_state s = { 0 };
  double t0 = now();
  for (long i = 0; i < n; i++) {
    luaretry_call *c;
    luaretry_decision d;
    if (luaretry_call_begin(p, &opt, &c) != LUARETRY_OK) die("begin", luaretry_policy_errmsg(p));
    if (luaretry_call_run(c, op, &s, &d) != LUARETRY_OK) die("run", luaretry_call_errmsg(c));
    if (d.reason != LUARETRY_REASON_SUCCESS || d.attempt != K + 1)
      die("run", "a call did not succeed at attempt 4");
    luaretry_call_free(c);
  }
  double t = now() - t0;
  if (s.attempts != n * (K + 1)) die("run", "wrong number of attempts");
  return t * 1e9 / (double)s.attempts;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 0.25;
  if (!(seconds > 0)) die("usage", "bench_loop [SECONDS]");
  if (chdir(LUARETRY_DATADIR) != 0) die(LUARETRY_DATADIR, "cannot chdir");

  luaretry_policy *p;
  if (luaretry_policy_new(&p) != LUARETRY_OK) die("policy_new", "out of memory");
  if (luaretry_policy_load_file(p, "policies/http.lua") != LUARETRY_OK)
    die("policies/http.lua", luaretry_policy_errmsg(p));
  if (luaretry_policy_set(p, "backoff.initial", "0") != LUARETRY_OK ||
      luaretry_policy_set(p, "backoff.jitter", "none") != LUARETRY_OK ||
      luaretry_policy_set(p, "budget", "none") != LUARETRY_OK)
    die("set", luaretry_policy_errmsg(p));
  luaretry_tuning t;
  if (luaretry_policy_tuning(p, &t) != LUARETRY_OK || t.initial != 0 ||
      t.jitter != LUARETRY_JITTER_NONE || t.max_attempts != 10)
    die("tuning", "expected initial 0, jitter none, max_attempts 10");

  for (int v = 1; v >= 0; v--) {
    /* Warm up, then size the run from the warm-up's pace. */
    long n = 200;
    double per, t0 = now();
    do {
      per = run(p, v, n);
      n *= 2;
    } while (now() - t0 < 0.03);
    long calls = (long)(seconds * 1e9 / (per * (K + 1)));
    if (calls < 100) calls = 100;
    per = run(p, v, calls);
    printf("%s %.1f %ld\n", v ? "virtual" : "real", per, calls);
  }
  luaretry_policy_free(p);
  return 0;
}
