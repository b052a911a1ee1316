/* latency.c: `simulate POLICY --latency SPEC [--calls N]`: SPEC read, and
 * the library's latency simulation (luaretry_simulate_latency) printed,
 * once with the policy's hedge and once without it, the same draws for
 * both: p50, p99, p99.9 and the requests per call.  SPEC is "BASE" or
 * "BASE,SLOW@FRACTION" (0.01,1@0.05: 10 ms, and 1 s for 5% of the
 * attempts). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* s's part up to the first of `stops` (or its end) as a number by the
 * options' rule (number.c), from 0 to hi, into *out; the byte after it, or
 * NULL when it is not that. */
static const char *part(const char *s, const char *stops, double hi, double *out) {
  char text[64];
  size_t n = strcspn(s, stops);
  if (n >= sizeof text) return NULL;
  snprintf(text, sizeof text, "%.*s", (int)n, s);
  return cli_decimal(text, out) && *out >= 0 && *out <= hi ? s + n : NULL;
}

int cli_latency_parse(const char *s, luaretry_latency_options *l) {
  l->slow = l->fraction = 0;
  if (!(s = part(s, ",", 3600, &l->base))) return -1;
  if (*s == '\0') return 0;
  if (!(s = part(s + 1, "@", 3600, &l->slow)) || *s != '@') return -1;
  return (s = part(s + 1, "", 1, &l->fraction)) && *s == '\0' ? 0 : -1;
}

/* One run, its line (or JSON object); the exit status. */
static int pass(luaretry_policy *p, luaretry_latency_options *l, int hedged, int json) {
  luaretry_latency_result r;
  l->no_hedge = !hedged;
  luaretry_code rc = luaretry_simulate_latency(p, l, &r);
  if (rc != LUARETRY_OK) {
    fprintf(stderr, "luaretry: simulate: %s\n",
            rc == LUARETRY_E_NOMEM ? "out of memory" : luaretry_policy_errmsg(p));
    return EXIT_POLICY;
  }
  if (json)
    printf(
      "{\"hedge\":%s,\"calls\":%llu,\"p50\":%.6f,\"p99\":%.6f,\"p999\":%.6f,"
      "\"requests\":%llu,\"requests_per_call\":%.6f,\"hedges\":%llu,\"hedges_won\":%llu}\n",
      hedged ? "true" : "false", (unsigned long long)r.calls, r.p50, r.p99, r.p999,
      (unsigned long long)r.requests, r.requests_per_call, (unsigned long long)r.hedges,
      (unsigned long long)r.hedges_won);
  else
    printf(
      "%-13s p50 %.3f s  p99 %.3f s  p99.9 %.3f s  %.3f requests per call (hedges %llu, "
      "won %llu)\n",
      hedged ? "with hedge:" : "without:", r.p50, r.p99, r.p999, r.requests_per_call,
      (unsigned long long)r.hedges, (unsigned long long)r.hedges_won);
  return EXIT_OK;
}

int cli_simulate_latency(luaretry_policy *p, const luaretry_latency_options *l, int json) {
  luaretry_latency_options o = *l;
  char delay[64], max[64];
  if (luaretry_policy_get(p, "hedge.delay", delay, sizeof delay) != LUARETRY_OK)
    snprintf(delay, sizeof delay, "none");
  if (luaretry_policy_get(p, "hedge.max", max, sizeof max) != LUARETRY_OK)
    snprintf(max, sizeof max, "none");
  if (!json) {
    printf("simulate: %ld calls on the virtual clock, each attempt %g s", o.calls, o.base);
    if (o.fraction > 0) printf(", %g s for %g%%", o.slow, o.fraction * 100);
    printf(" (seed %llu); hedge.delay %s, hedge.max %s\n", (unsigned long long)o.seed, delay, max);
  }
  int status = pass(p, &o, 1, json);
  return status == EXIT_OK ? pass(p, &o, 0, json) : status;
}
