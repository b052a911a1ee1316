/* latency.c: `simulate POLICY --latency SPEC [--calls N]`: N calls on the
 * virtual clock through the step API, each attempt answering (200) after a
 * latency drawn from SPEC, "BASE" or "BASE,SLOW@FRACTION" (0.01,1@0.05: 10
 * ms, and 1 s for 5% of the attempts; an attempt longer than its timeout
 * times out); once with the policy's hedge and once without it, the same
 * draws for both: p50, p99, p99.9 and the requests per call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define MAX_CALLS  1000000
#define MAX_FLIGHT 12
#define MAX_EVENTS 100000 /* per call: a bound on its loop, never reached */

int cli_latency_parse(const char *s, cli_latency *l) {
  char *end;
  memset(l, 0, sizeof *l);
  l->base = strtod(s, &end);
  if (end == s || !(l->base >= 0 && l->base <= 3600)) return -1;
  if (*end == '\0') return 0;
  if (*end != ',') return -1;
  s = end + 1;
  l->slow = strtod(s, &end);
  if (end == s || *end != '@' || !(l->slow >= 0 && l->slow <= 3600)) return -1;
  s = end + 1;
  l->fraction = strtod(s, &end);
  return end != s && *end == '\0' && l->fraction >= 0 && l->fraction <= 1 ? 0 : -1;
}

/* splitmix64: the draws of a pass, the same for both */
static double unit(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (double)(z >> 11) / 9007199254740992.0;
}

typedef struct {
  int id;
  double end;
  int timed_out;
} flight;

typedef struct {
  luaretry_call *c;
  const cli_latency *l;
  uint64_t *rng;
  flight f[MAX_FLIGHT];
  int n;
  long sent;
} one;

static void launch(one *o, int id, double timeout) {
  if (o->n == MAX_FLIGHT) return;
  double now = luaretry_call_elapsed(o->c);
  double took = unit(o->rng) < o->l->fraction ? o->l->slow : o->l->base;
  int late = timeout > 0 && took > timeout;
  o->f[o->n++] = (flight){ id, now + (late ? timeout : took), late };
  o->sent++;
}

/* The next attempt to end, its flight taken out. */
static flight land(one *o) {
  int k = 0;
  for (int i = 1; i < o->n; i++)
    if (o->f[i].end < o->f[k].end) k = i;
  flight f = o->f[k];
  o->f[k] = o->f[--o->n];
  return f;
}

static const luaretry_request GET = { .method = "GET", .url = "http://simulate.invalid/" };

/* One call to its end: 0 with its time in *took, or -1 (a policy error,
 * said). */
static int call(one *o, double *took) {
  luaretry_decision d;
  int id;
  if (luaretry_call_next(o->c, &d) != LUARETRY_OK || !d.retry ||
      luaretry_call_start(o->c, &id) != LUARETRY_OK)
    return *took = luaretry_call_elapsed(o->c), 0;
  launch(o, id, d.next_timeout);
  for (int events = 0; events < MAX_EVENTS && o->n; events++) {
    double now = luaretry_call_elapsed(o->c), in = luaretry_call_hedge_in(o->c);
    flight next = o->f[0];
    for (int i = 1; i < o->n; i++)
      if (o->f[i].end < next.end) next = o->f[i];
    if (in >= 0 && now + in < next.end) {
      luaretry_call_wait(o->c, in);
      if (luaretry_call_hedge(o->c, &GET, &d) != LUARETRY_OK) return -1;
      if (d.retry) launch(o, d.attempt, d.next_timeout);
      continue;
    }
    flight f = land(o);
    luaretry_call_wait(o->c, f.end - now);
    luaretry_outcome out;
    luaretry_outcome_init(&out);
    out.status = f.timed_out ? 0 : 200;
    out.error = f.timed_out ? "timeout" : NULL;
    out.method = "GET";
    if (luaretry_call_report_attempt(o->c, f.id, &out, &d) != LUARETRY_OK) return -1;
    if (!d.retry && d.reason == LUARETRY_REASON_NONE) continue; /* others in flight */
    o->n = 0; /* the call stopped: the others are cancelled */
    if (!d.retry) break;
    luaretry_call_wait(o->c, d.wait);
    if (luaretry_call_next(o->c, &d) != LUARETRY_OK || !d.retry ||
        luaretry_call_start(o->c, &id) != LUARETRY_OK)
      break;
    launch(o, id, d.next_timeout);
  }
  *took = luaretry_call_elapsed(o->c);
  return 0;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* One pass of `calls` calls; its line (or JSON object). */
static int pass(luaretry_policy *p, const cli_latency *l, long calls, uint64_t seed, int hedged,
                int json, double *took) {
  luaretry_metrics before, after;
  luaretry_policy_metrics(p, &before);
  uint64_t rng = seed;
  long sent = 0;
  for (long i = 0; i < calls; i++) {
    luaretry_call_options opt;
    luaretry_call_options_init(&opt);
    opt.flags =
      LUARETRY_CALL_VIRTUAL_TIME | LUARETRY_CALL_SEED | (hedged ? 0 : LUARETRY_CALL_NO_HEDGE);
    opt.seed = seed + (uint64_t)i;
    one o = { NULL, l, &rng, { { 0, 0, 0 } }, 0, 0 };
    if (luaretry_call_begin(p, &opt, &o.c) != LUARETRY_OK) return EXIT_POLICY;
    int rc = call(&o, &took[i]);
    if (rc != 0) fprintf(stderr, "luaretry: simulate: %s\n", luaretry_call_errmsg(o.c));
    luaretry_call_free(o.c);
    if (rc != 0) return EXIT_POLICY;
    sent += o.sent;
  }
  luaretry_policy_metrics(p, &after);
  qsort(took, (size_t)calls, sizeof *took, by_value);
  double p50 = took[(calls - 1) / 2], p99 = took[(calls * 99 - 1) / 100],
         p999 = took[(calls * 999 - 1) / 1000];
  unsigned long long hedges = after.hedges - before.hedges,
                     won = after.hedges_won - before.hedges_won;
  if (json)
    printf(
      "{\"hedge\":%s,\"calls\":%ld,\"p50\":%.6f,\"p99\":%.6f,\"p999\":%.6f,"
      "\"requests\":%ld,\"requests_per_call\":%.6f,\"hedges\":%llu,\"hedges_won\":%llu}\n",
      hedged ? "true" : "false", calls, p50, p99, p999, sent, (double)sent / (double)calls, hedges,
      won);
  else
    printf(
      "%-13s p50 %.3f s  p99 %.3f s  p99.9 %.3f s  %.3f requests per call (hedges %llu, "
      "won %llu)\n",
      hedged ? "with hedge:" : "without:", p50, p99, p999, (double)sent / (double)calls, hedges,
      won);
  return EXIT_OK;
}

int cli_simulate_latency(luaretry_policy *p, const cli_latency *l, long calls, uint64_t seed,
                         int json) {
  if (calls < 1 || calls > MAX_CALLS) calls = 1000;
  char delay[64], max[64];
  if (luaretry_policy_get(p, "hedge.delay", delay, sizeof delay) != LUARETRY_OK)
    snprintf(delay, sizeof delay, "none");
  if (luaretry_policy_get(p, "hedge.max", max, sizeof max) != LUARETRY_OK)
    snprintf(max, sizeof max, "none");
  if (!json) {
    printf("simulate: %ld calls on the virtual clock, each attempt %g s", calls, l->base);
    if (l->fraction > 0) printf(", %g s for %g%%", l->slow, l->fraction * 100);
    printf(" (seed %llu); hedge.delay %s, hedge.max %s\n", (unsigned long long)seed, delay, max);
  }
  double *took = malloc((size_t)calls * sizeof *took);
  if (!took) {
    fprintf(stderr, "luaretry: simulate: out of memory\n");
    return EXIT_POLICY;
  }
  int status = pass(p, l, calls, seed, 1, json, took);
  if (status == EXIT_OK) status = pass(p, l, calls, seed, 0, json, took);
  free(took);
  return status;
}
