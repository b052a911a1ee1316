/* latency.c: luaretry_simulate_latency, what a policy's hedge does to the
 * tail: N calls on the virtual clock through the step API, each attempt
 * answering (200) after a latency drawn from base, or slow for `fraction`
 * of the attempts (an attempt longer than its timeout times out).  The
 * one latency simulator, for `simulate --latency` and for hosts.  The
 * calls share guards of their own, fresh for each simulation, so a run
 * with the hedge and one without start alike and the policy's guards and
 * counters are never touched. */
#include <stdlib.h>
#include <string.h>

#include "policy.h"

#define LATENCY_MAX_CALLS  1000000L
#define LATENCY_MAX_FLIGHT 12
#define LATENCY_MAX_EVENTS 100000 /* per call: a bound on its loop, never reached */

/* splitmix64: the latencies' draws, the same with the hedge and without */
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
  const luaretry_latency_options *o;
  uint64_t *rng;
  flight f[LATENCY_MAX_FLIGHT];
  int n;
  uint64_t sent;
  const char *failed; /* the decision's message when the policy failed */
} one_call;

static void launch(one_call *o, int id, double timeout) {
  if (o->n == LATENCY_MAX_FLIGHT) return;
  double now = luaretry_call_elapsed(o->c);
  double took = unit(o->rng) < o->o->fraction ? o->o->slow : o->o->base;
  int late = timeout > 0 && took > timeout;
  o->f[o->n++] = (flight){ id, now + (late ? timeout : took), late };
  o->sent++;
}

/* The attempt in flight that ends first: its index. */
static int first_to_end(const one_call *o) {
  int k = 0;
  for (int i = 1; i < o->n; i++)
    if (o->f[i].end < o->f[k].end) k = i;
  return k;
}

static const luaretry_request GET = { .method = "GET", .url = "http://simulate.invalid/" };

/* A call the policy stopped with its own error (a hook that raised):
 * LUARETRY_E_POLICY, the message kept in o->failed, for the numbers of a
 * simulation whose calls ended in errors would be believed. */
static luaretry_code judged(one_call *o, luaretry_code rc, const luaretry_decision *d) {
  if (rc != LUARETRY_OK || d->retry || d->reason != LUARETRY_REASON_POLICY_ERROR) return rc;
  o->failed = d->message ? d->message : "policy error";
  return LUARETRY_E_POLICY;
}

/* The next attempt after a decision to retry (or the first): asked until
 * it may go at once, the rate limiter's waits waited, as a host waits
 * them.  0 when it went, 1 when the call stopped instead (*rc:
 * LUARETRY_OK, or the policy's error). */
static int next_attempt(one_call *o, luaretry_decision *d, luaretry_code *rc) {
  int id;
  for (int asks = 0; asks < LATENCY_MAX_EVENTS; asks++) {
    if ((*rc = judged(o, luaretry_call_next(o->c, d), d)) != LUARETRY_OK || !d->retry) return 1;
    if (!(d->wait > 0)) break;
    luaretry_call_wait(o->c, d->wait);
  }
  if (luaretry_call_start(o->c, &id) != LUARETRY_OK) return 1;
  launch(o, id, d->next_timeout);
  return 0;
}

/* One call to its end: LUARETRY_OK, or the policy's error (o->failed or
 * the call's errmsg says why). */
static luaretry_code run_call(one_call *o) {
  luaretry_decision d;
  luaretry_code rc;
  if (next_attempt(o, &d, &rc)) return rc;
  for (int events = 0; events < LATENCY_MAX_EVENTS && o->n; events++) {
    double now = luaretry_call_elapsed(o->c), in = luaretry_call_hedge_in(o->c);
    int k = first_to_end(o);
    if (in >= 0 && now + in < o->f[k].end) { /* the hedge goes first */
      luaretry_call_wait(o->c, in);
      if ((rc = judged(o, luaretry_call_hedge(o->c, &GET, &d), &d)) != LUARETRY_OK) return rc;
      if (d.retry) launch(o, d.attempt, d.next_timeout);
      continue;
    }
    flight f = o->f[k];
    o->f[k] = o->f[--o->n];
    luaretry_call_wait(o->c, f.end - now);
    luaretry_outcome out;
    luaretry_outcome_init(&out);
    out.status = f.timed_out ? 0 : 200;
    out.error = f.timed_out ? "timeout" : NULL;
    out.method = "GET";
    rc = judged(o, luaretry_call_report_attempt(o->c, f.id, &out, &d), &d);
    if (rc != LUARETRY_OK) return rc;
    if (!d.retry && d.reason == LUARETRY_REASON_NONE) continue; /* others in flight */
    o->n = 0; /* the call stopped: the others are cancelled */
    if (!d.retry) break;
    luaretry_call_wait(o->c, d.wait);
    if (next_attempt(o, &d, &rc)) return rc;
  }
  return LUARETRY_OK;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The calls one after another on `shared`, each one's time in took[]:
 * each begins where the one before ended, on one timeline for the guards
 * (its own clock restarts at 0; at the real time of each begin, a
 * thousand calls of 0.5 s met the rate limiter within a millisecond). */
static luaretry_code run_calls(luaretry_policy *p, lr_gen *g, lr_shared *shared,
                               const luaretry_latency_options *o, double *took,
                               luaretry_latency_result *r) {
  uint64_t rng = o->seed;
  double timeline = lr_monotonic_now();
  for (long i = 0; i < o->calls; i++) {
    luaretry_call_options opt;
    luaretry_call_options_init(&opt);
    opt.flags =
      LUARETRY_CALL_VIRTUAL_TIME | LUARETRY_CALL_SEED | (o->no_hedge ? LUARETRY_CALL_NO_HEDGE : 0);
    opt.seed = o->seed + (uint64_t)i;
    one_call one = { NULL, o, &rng, { { 0, 0, 0 } }, 0, 0, NULL };
    lr_gen_ref(g); /* the call's; its judge gives it back */
    luaretry_code rc = lr_call_new(&g->judge, &g->rules, 0, shared, NULL, &opt, &one.c);
    if (rc != LUARETRY_OK) return rc;
    lr_call_guard_origin(one.c, timeline);
    rc = run_call(&one);
    timeline += luaretry_call_elapsed(one.c);
    if (rc != LUARETRY_OK)
      lr_policy_error(p, one.failed ? one.failed : luaretry_call_errmsg(one.c));
    took[i] = luaretry_call_elapsed(one.c);
    luaretry_call_free(one.c);
    if (rc != LUARETRY_OK) return rc;
    r->requests += one.sent;
  }
  return LUARETRY_OK;
}

/* Options out of range: the first one named in *why (NULL: none). */
static const char *bad_option(const luaretry_latency_options *o, char *why, size_t size) {
  if (o->calls < 1 || o->calls > LATENCY_MAX_CALLS)
    lr_fmt(why, size, "calls %ld: expected 1 to %ld", o->calls, LATENCY_MAX_CALLS);
  else if (!(o->base >= 0 && o->base <= 3600))
    lr_fmt(why, size, "base %g: expected seconds from 0 to 3600", o->base);
  else if (!(o->slow >= 0 && o->slow <= 3600))
    lr_fmt(why, size, "slow %g: expected seconds from 0 to 3600", o->slow);
  else if (!(o->fraction >= 0 && o->fraction <= 1))
    lr_fmt(why, size, "fraction %g: expected 0 to 1", o->fraction);
  else
    return NULL;
  return why;
}

void luaretry_latency_options_init(luaretry_latency_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->calls = 1000;
}

luaretry_code luaretry_simulate_latency(luaretry_policy *p, const luaretry_latency_options *o,
                                        luaretry_latency_result *r) {
  char why[160], msg[200];
  if (!lr_policy_ok(p)) return LUARETRY_E_ARG;
  if (!o || !r || bad_option(o, why, sizeof why)) {
    lr_fmt(msg, sizeof msg, "luaretry_simulate_latency: %s",
           !o || !r ? "no options or result" : why);
    lr_policy_error(p, msg);
    return LUARETRY_E_ARG;
  }
  memset(r, 0, sizeof *r);
  lr_gen *g = lr_policy_current(p);
  if (!g) return LUARETRY_E_STATE;
  double *took = malloc((size_t)o->calls * sizeof *took);
  lr_shared *shared = lr_aligned_calloc(sizeof *shared);
  luaretry_code rc = LUARETRY_E_NOMEM;
  if (took && shared) {
    lr_shared_init(shared, &g->rules.guards);
    rc = run_calls(p, g, shared, o, took, r);
  }
  if (rc == LUARETRY_OK) {
    long n = o->calls;
    qsort(took, (size_t)n, sizeof *took, by_value);
    r->calls = (uint64_t)n;
    r->p50 = took[(n - 1) / 2];
    r->p99 = took[(n * 99 - 1) / 100];
    r->p999 = took[(n * 999 - 1) / 1000];
    r->requests_per_call = (double)r->requests / (double)n;
    r->hedges = (uint64_t)lr_counted(shared, LR_M_HEDGES);
    r->hedges_won = (uint64_t)lr_counted(shared, LR_M_HEDGES_WON);
  }
  free(shared);
  free(took);
  lr_gen_unref(g);
  return rc;
}
