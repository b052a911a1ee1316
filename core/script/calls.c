/* calls.c: a policy's side of its calls.  luaretry_call_begin is where the
 * policy hands the engine a judge (one of its Lua states), the rules of the
 * same load and its shared guards; simulations and probes; the request
 * hooks for hosts without a call. */
#include <string.h>

#include "policy.h"

static luaretry_code begin(luaretry_policy *p, const luaretry_call_options *o,
                           long max_attempts, luaretry_call **out) {
  if (!p || !out) return LUARETRY_E_ARG;
  *out = NULL;
  if (!lr_policy_loaded(p)) return LUARETRY_E_STATE;
  lr_judge j;
  lr_rules r;
  luaretry_code rc = lr_policy_checkout(p, &j, &r);
  if (rc != LUARETRY_OK) return rc;
  if (max_attempts > 0) r.max_attempts = max_attempts;
  return lr_call_new(&j, &r, lr_policy_shared(p), o, out);
}

luaretry_code luaretry_call_begin(luaretry_policy *p, const luaretry_call_options *o,
                                  luaretry_call **out) {
  return begin(p, o, 0, out);
}

/* Without max_attempts a zero-wait policy would never reach its deadline
 * on a virtual clock; simulate stops there. */
#define SIMULATE_MAX_ATTEMPTS 100000L

luaretry_code luaretry_simulate(luaretry_policy *p, uint64_t seed, long attempts,
                                luaretry_decision_fn each, void *ud) {
  luaretry_call_options opt;
  luaretry_call_options_init(&opt);
  opt.flags = LUARETRY_CALL_SEED | LUARETRY_CALL_VIRTUAL_TIME | LUARETRY_CALL_ISOLATED;
  opt.seed = seed;
  if (!p) return LUARETRY_E_ARG;
  long limit = attempts > 0 ? attempts : p->main ? p->tuning.max_attempts : 0;
  if (limit <= 0 || limit > SIMULATE_MAX_ATTEMPTS) limit = SIMULATE_MAX_ATTEMPTS;
  luaretry_call *c;
  luaretry_code rc = begin(p, &opt, limit, &c);
  if (rc != LUARETRY_OK) return rc;
  luaretry_outcome o;
  luaretry_outcome_init(&o);
  o.status = 503;
  luaretry_decision d;
  for (;;) {
    rc = lr_call_report_class(c, &o, LUARETRY_CLASS_TRANSIENT, &d);
    if (rc != LUARETRY_OK) break;
    if (each && each(ud, &d)) break;
    if (!d.retry) break;
    luaretry_call_wait(c, d.wait);
  }
  luaretry_call_free(c);
  return rc;
}

luaretry_code luaretry_policy_sample_backoff(const luaretry_policy *p, uint64_t n,
                                             uint64_t seed, double previous, double *out,
                                             size_t count) {
  if (!p || (!out && count)) return LUARETRY_E_ARG;
  if (!p->main) return LUARETRY_E_STATE;
  const lr_backoff *b = &p->rules.backoff;
  if (b->kind == LUARETRY_BACKOFF_SCRIPT) return LUARETRY_E_STATE;
  lr_rng rng;
  lr_rng_seed(&rng, seed);
  for (size_t i = 0; i < count; i++) {
    double prev = previous < 0 ? b->initial : previous;
    int capped;
    out[i] = lr_backoff_wait(b, n, &prev, &rng, &capped);
  }
  return LUARETRY_OK;
}

/* ---- the same for hosts without a call: the policy's loaded script */

luaretry_code luaretry_policy_is_idempotent(luaretry_policy *p, const luaretry_request *r,
                                            int *idempotent) {
  if (!p || !r || !idempotent) return LUARETRY_E_ARG;
  if (!p->main) return LUARETRY_E_STATE;
  luaretry_code rc = lr_script_is_idempotent(p->main, r, idempotent);
  if (rc != LUARETRY_OK) lr_strlcpy(p->errmsg, p->main->errmsg, sizeof p->errmsg);
  return rc;
}

luaretry_code luaretry_policy_prepare(luaretry_policy *p, const luaretry_request *in,
                                      int attempt, luaretry_request *out) {
  if (!p || !in || !out) return LUARETRY_E_ARG;
  if (!p->main) return LUARETRY_E_STATE;
  luaretry_code rc = lr_script_prepare(p->main, in, attempt, out);
  if (rc != LUARETRY_OK) lr_strlcpy(p->errmsg, p->main->errmsg, sizeof p->errmsg);
  return rc;
}

