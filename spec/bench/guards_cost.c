/* guards_cost.c: what the chain of guards costs a decision, in
 * instructions (run it under `valgrind --tool=callgrind`, as README.md's
 * "the guards' chain" says) and in CPU time (best of 5 runs).
 *
 *   guards_cost N [guards|off]
 *
 * N decisions through the step API on the virtual clock with
 * policies/http.lua's is_transient (the same 49-byte body), calls of two
 * attempts: a 503, then a 200, so that no guard refuses for good (a
 * success gives the budget back, is an accept to admission, closes the
 * breaker's count).  With `guards`: budget, breaker, admission and a rate
 * limiter that never waits (1e9 a second) are on; with `off`, http.lua's
 * shipped guards (a budget with a reserve, an adaptive rate) are turned
 * off as `--set budget=none --set rate=none` does; with neither, they are
 * as shipped, and the calls are bench_decide's steady mix (1 call in 10
 * gets a 503 then a 200, the others a 200): calls of a 503 and a 200 only
 * spend a token and get 0.1 back each, and the budget then refuses their
 * retries, which is not what a decision costs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "luaretry.h"

static const char BODY[] = "{\"error\":{\"code\":503,\"status\":\"UNAVAILABLE\"}}\n";

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void set(luaretry_policy *p, const char *name, const char *value) {
  if (luaretry_policy_set(p, name, value) != LUARETRY_OK) {
    fprintf(stderr, "%s=%s: %s\n", name, value, luaretry_policy_errmsg(p));
    exit(1);
  }
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 200000;
  int guards = argc > 2 && strcmp(argv[2], "guards") == 0;
  int off = argc > 2 && strcmp(argv[2], "off") == 0;
  int mix = !guards && !off; /* as shipped: the steady mix */
  luaretry_policy *p;
  luaretry_policy_new(&p);
  if (luaretry_policy_load_file(p, "policies/http.lua") != LUARETRY_OK) {
    fprintf(stderr, "%s\n", luaretry_policy_errmsg(p));
    return 1;
  }
  if (off) {
    set(p, "budget", "none");
    set(p, "rate", "none");
  }
  if (guards) {
    set(p, "budget.max_tokens", "10");
    set(p, "budget.token_ratio", "1");
    set(p, "breaker.failures", "5");
    set(p, "throttle.k", "2");
    set(p, "rate.limit", "1e9");
    set(p, "rate.burst", "1000000");
  }
  luaretry_outcome busy, ok;
  luaretry_outcome_init(&busy);
  busy.status = 503;
  busy.body = BODY;
  busy.body_len = sizeof BODY - 1;
  busy.method = "GET";
  busy.url = "http://service.invalid/v1/items";
  ok = busy;
  ok.status = 200;
  double best = 1e30;
  long refused = 0;
  for (int run = 0; run < 5; run++) {
    double t0 = cpu_now();
    luaretry_call *c = NULL;
    luaretry_call_options o;
    luaretry_call_options_init(&o);
    o.flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME;
    long calls = 0;
    for (long i = 0; i < n; i++) {
      luaretry_decision d;
      int first = !c;
      if (!c) {
        o.seed = (uint64_t)i;
        luaretry_call_begin(p, &o, &c);
        calls++;
      }
      /* 503 and 200 in turn; as shipped, the first attempt of 1 call in 10 */
      int fail = mix ? first && calls % 10 == 1 : i % 2 == 0;
      luaretry_call_report(c, fail ? &busy : &ok, &d);
      if (d.retry) {
        luaretry_call_wait(c, d.wait);
      } else {
        refused += d.reason != LUARETRY_REASON_SUCCESS;
        luaretry_call_free(c);
        c = NULL;
      }
    }
    luaretry_call_free(c);
    double t = (cpu_now() - t0) * 1e9 / (double)n;
    if (t < best) best = t;
    if (getenv("GUARDS_COST_ONCE")) break; /* callgrind: one run */
  }
  printf("guards_cost: %ld decisions%s: %.1f ns each (best of 5), %ld calls refused or failed\n", n,
         guards ? " with budget, breaker, admission and rate on"
         : off  ? ", guards off"
                : ", http.lua's guards as shipped, 1 call in 10 fails once",
         best, refused);
  luaretry_policy_free(p);
  return 0;
}
