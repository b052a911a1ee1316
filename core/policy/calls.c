/* calls.c: a policy's side of its calls.  luaretry_call_begin is where the
 * policy hands the engine a judge, the rules of the same load and its
 * shared guards: the call holds a reference to the load, nothing more.
 * Also simulations, backoff samples, and the request hooks for hosts
 * without a call. */
#include <stdlib.h>
#include <string.h>

#include "policy.h"

/* Every flag this library knows: a bit past them is a host built against a
 * newer luaretry.h, or a stray value; either way it would be ignored. */
#define KNOWN_CALL_FLAGS                                                              \
  (LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME | LUARETRY_CALL_ISOLATED |         \
   LUARETRY_CALL_NO_HEDGE | LUARETRY_CALL_WORKFLOW_REQUEST | LUARETRY_CALL_DEADLINE | \
   LUARETRY_CALL_RETRIES | LUARETRY_CALL_WORKFLOW)

/* NULL when the options can be taken, else why not: a flag unknown here,
 * two that contradict, or reserved room a later version's fields would
 * read (a host that did not start them zeroed). */
static const char *bad_options(const luaretry_call_options *o, char *why, size_t size) {
  const unsigned both = LUARETRY_CALL_WORKFLOW | LUARETRY_CALL_WORKFLOW_REQUEST;
  if (!o) return NULL;
  if (o->flags & ~KNOWN_CALL_FLAGS)
    lr_fmt(why, size, "unknown flags 0x%x (this library knows 0x%x)", o->flags & ~KNOWN_CALL_FLAGS,
           (unsigned)KNOWN_CALL_FLAGS);
  else if ((o->flags & both) == both)
    lr_fmt(why, size,
           "LUARETRY_CALL_WORKFLOW with LUARETRY_CALL_WORKFLOW_REQUEST: a call is a workflow's "
           "own or one of its requests, not both");
  else if (o->reserved_32 || o->reserved[0] || o->reserved[1])
    lr_fmt(why, size,
           "the options' reserved fields are not zero (start from luaretry_call_options_init, "
           "or a designated initializer)");
  else
    return NULL;
  return why;
}

static luaretry_code begin(luaretry_policy *p, const luaretry_call_options *o, long max_attempts,
                           luaretry_call **out) {
  if (!p) return LUARETRY_E_ARG;
  if (!out) return lr_policy_refuse_null(p, "luaretry_call_begin", "out");
  *out = NULL;
  char why[200];
  if (bad_options(o, why, sizeof why)) {
    lr_fmt(lr_policy_errbuf(p), LR_ERRMSG_SIZE, "luaretry_call_begin: %s", why);
    return LUARETRY_E_ARG;
  }
  lr_gen *g = lr_policy_current(p); /* the call's reference */
  if (!g) return lr_policy_unloaded(p, "luaretry_call_begin");
  /* Simulations, probes and tests (the virtual clock, or guards of their
   * own) never touch the fleet: their counts are not real. */
  unsigned flags = o ? o->flags : 0;
  int pretend = (flags & (LUARETRY_CALL_VIRTUAL_TIME | LUARETRY_CALL_ISOLATED)) != 0;
  const lr_remote *remote = pretend ? NULL : &g->rules.remote;
  return lr_call_new(&g->judge, &g->rules, max_attempts, lr_policy_shared(p), remote, o, out);
}

luaretry_code luaretry_call_begin(luaretry_policy *p, const luaretry_call_options *o,
                                  luaretry_call **out) {
  if (!lr_policy_ok(p)) return out ? (*out = NULL, LUARETRY_E_ARG) : LUARETRY_E_ARG;
  return begin(p, o, 0, out);
}

/* luaretry_call_next until the attempt may go at once, as run's hosts ask
 * it (the curl helper, luaretry_call_run): a rate token is taken there,
 * and header pacing's slot.  The waits it adds go into *extra, on the
 * virtual clock; *n is its last answer (a stop, or go now).  Each answer
 * is a later time on that clock, so the count only bounds a fault. */
static luaretry_code await_go(luaretry_call *c, luaretry_decision *n, double *extra,
                              luaretry_wait_source *src) {
  *extra = 0;
  for (long k = 0; k < LUARETRY_SIMULATE_ATTEMPT_CAP; k++) {
    luaretry_code rc = luaretry_call_next(c, n);
    if (rc != LUARETRY_OK || !n->retry || !(n->wait > 0)) return rc;
    *extra += n->wait;
    *src = n->wait_source; /* the last answer, go now, has none */
    rc = luaretry_call_wait(c, n->wait);
    if (rc != LUARETRY_OK) return rc;
  }
  return LUARETRY_OK;
}

/* A retry's whole wait before the next attempt: the decision's and what
 * luaretry_call_next added (its source then: the rate limiter's token or
 * the server's RateLimit quota), and that attempt's timeout. */
static void whole_wait(luaretry_decision *d, const luaretry_decision *n, double extra,
                       luaretry_wait_source src) {
  if (!(extra > 0)) return;
  d->wait += extra;
  d->wait_source = src;
  d->next_timeout = n->next_timeout;
}

/* Without max_attempts a zero-wait policy would never reach its deadline
 * on a virtual clock; simulate stops there.  The steps are run's (next,
 * the attempt, its report, the wait), so a guard that acts as an attempt
 * goes (the rate limiter, header pacing) acts here as in a run. */

luaretry_code luaretry_simulate(luaretry_policy *p, uint64_t seed, long attempts,
                                luaretry_decision_fn each, void *ud) {
  if (!lr_policy_ok(p)) return LUARETRY_E_ARG;
  luaretry_call_options opt;
  luaretry_call_options_init(&opt);
  opt.flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME | LUARETRY_CALL_ISOLATED;
  opt.seed = seed;
  luaretry_tuning t;
  luaretry_code rc = luaretry_policy_tuning(p, &t);
  if (rc != LUARETRY_OK) return lr_policy_unloaded(p, "luaretry_simulate");
  long limit = attempts > 0 ? attempts : t.max_attempts;
  if (limit <= 0 || limit > LUARETRY_SIMULATE_ATTEMPT_CAP) limit = LUARETRY_SIMULATE_ATTEMPT_CAP;
  luaretry_call *c;
  rc = begin(p, &opt, limit, &c);
  if (rc != LUARETRY_OK) return rc;
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.status = 503;
  luaretry_decision d, n;
  double extra;
  luaretry_wait_source src = LUARETRY_WAIT_NONE;
  rc = await_go(c, &n, &extra, &src); /* the first attempt's token */
  if (rc == LUARETRY_OK && !n.retry && each) each(ud, &n);
  while (rc == LUARETRY_OK && n.retry) {
    rc = lr_call_report_class(c, &o, LUARETRY_CLASS_TRANSIENT, &d);
    if (rc != LUARETRY_OK) break;
    if (!d.retry) { /* the call stopped on this attempt */
      if (each) each(ud, &d);
      break;
    }
    luaretry_call_wait(c, d.wait); /* on the virtual clock, as before the next ask */
    if ((rc = await_go(c, &n, &extra, &src)) != LUARETRY_OK) break;
    whole_wait(&d, &n, extra, src);
    if (each && each(ud, &d)) break;
    /* refused as the next attempt would go: its own decision */
    if (!n.retry && each) each(ud, &n);
  }
  luaretry_call_free(c);
  return rc;
}

luaretry_code luaretry_policy_sample_backoff(const luaretry_policy *p, uint64_t n, uint64_t seed,
                                             double previous, double *out, size_t count) {
  if (!lr_policy_ok(p)) return LUARETRY_E_ARG;
  if (!out && count) return lr_policy_refuse_null(p, "luaretry_policy_sample_backoff", "out");
  lr_gen *g = lr_policy_current((luaretry_policy *)p);
  if (!g) return LUARETRY_E_STATE;
  const lr_backoff *b = &g->rules.backoff;
  luaretry_code rc = LUARETRY_E_STATE;
  if (b->kind != LUARETRY_BACKOFF_SCRIPT) {
    lr_rng rng;
    lr_rng_seed(&rng, seed);
    for (size_t i = 0; i < count; i++) {
      double prev = previous < 0 ? b->initial : previous;
      int capped;
      out[i] = lr_backoff_wait(b, n, &prev, &rng, &capped);
    }
    rc = LUARETRY_OK;
  }
  lr_gen_unref(g);
  return rc;
}

/* ---- the request hooks for hosts without a call: the current load */

luaretry_code luaretry_policy_is_idempotent(luaretry_policy *p, const luaretry_request *r,
                                            int *idempotent) {
  if (!lr_policy_ok(p)) return LUARETRY_E_ARG;
  if (!r || !idempotent)
    return lr_policy_refuse_null(p, "luaretry_policy_is_idempotent", !r ? "r" : "idempotent");
  lr_gen *g = lr_policy_current(p);
  if (!g) return lr_policy_unloaded(p, "luaretry_policy_is_idempotent");
  char err[LR_ERRMSG_SIZE];
  luaretry_code rc = lr_gen_is_idempotent(g, r, idempotent, NULL, err, sizeof err);
  lr_gen_unref(g);
  if (rc != LUARETRY_OK) lr_policy_error(p, err);
  return rc;
}

luaretry_code luaretry_policy_prepare(luaretry_policy *p, const luaretry_request *in, int attempt,
                                      luaretry_request *out) {
  if (!lr_policy_ok(p)) return LUARETRY_E_ARG;
  if (!in || !out) return lr_policy_refuse_null(p, "luaretry_policy_prepare", !in ? "in" : "out");
  lr_gen *g = lr_policy_current(p);
  if (!g) return lr_policy_unloaded(p, "luaretry_policy_prepare");
  /* no call: info.call lasts this one prepare */
  lr_call_data once;
  memset(&once, 0, sizeof once);
  lr_attempt_ctx ctx = { attempt, 0, NULL, &once, 0, NULL, 0 };
  char err[LR_ERRMSG_SIZE];
  luaretry_code rc = lr_gen_prepare(g, in, attempt, out, &p->prepared, &ctx, err, sizeof err);
  free(once.blob);
  lr_gen_unref(g);
  if (rc != LUARETRY_OK) lr_policy_error(p, err);
  return rc;
}
