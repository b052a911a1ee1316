/* probes.c: `simulate --probe OUTCOME...`: one call on the virtual clock
 * whose attempts meet the given outcomes in order (the last one repeats),
 * each judged by the policy as `run` would judge it: prepare() and
 * is_idempotent() before it, is_transient() after; and stepped as `run`
 * steps it (luaretry_call_next before each attempt, where the rate
 * limiter's token and header pacing's slot are taken: their waits are
 * part of the wait shown). */
#include <stdio.h>

#include "cli/cli.h"
#include "cli/simulate/simulate.h"

#define PROBE_ATTEMPT_CAP 100000L /* as luaretry_simulate without max_attempts */

int cli_simulate_probes(luaretry_policy *p, const cli_probe *pr, size_t n, uint64_t seed,
                        luaretry_decision_fn each, void *ud) {
  luaretry_call *c;
  luaretry_code rc = cli_probe_begin(p, seed, &c);
  if (rc != LUARETRY_OK) {
    fprintf(stderr, "luaretry: simulate: %s\n", luaretry_strerror(rc));
    return EXIT_POLICY;
  }
  int status = EXIT_OK;
  luaretry_decision ask;
  /* the first attempt's token, as run takes it */
  if ((rc = cli_probe_go(c, &ask)) != LUARETRY_OK || !ask.retry) {
    if (rc == LUARETRY_OK)
      each(ud, &ask);
    else
      status = EXIT_POLICY;
    luaretry_call_free(c);
    return status;
  }
  for (long k = 1; k <= PROBE_ATTEMPT_CAP; k++) {
    const cli_probe *x = &pr[(size_t)k <= n ? (size_t)k - 1 : n - 1];
    luaretry_outcome o;
    cli_probe_outcome(p, x, &o);
    char why[1024];
    luaretry_decision d;
    if (cli_probe_prepare(c, x, (int)k, &o.not_repeatable, why, sizeof why) != 0 ||
        (rc = luaretry_call_report(c, &o, &d)) != LUARETRY_OK) {
      fprintf(stderr, "luaretry: simulate: attempt %ld: %s\n", k,
              rc == LUARETRY_OK ? why : luaretry_call_errmsg(c));
      status = EXIT_POLICY;
      break;
    }
    /* the whole wait before the next attempt: the decision's, then next's */
    if (d.retry && cli_probe_retry(c, &d, &ask) != LUARETRY_OK) {
      status = EXIT_POLICY;
      break;
    }
    if (each(ud, &d) != 0 || !d.retry) break;
    if (!ask.retry) { /* refused as the next attempt would go */
      each(ud, &ask);
      break;
    }
  }
  luaretry_call_free(c);
  return status;
}
