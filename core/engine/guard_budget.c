/* guard_budget.c: the retry budget (gRPC's retry throttling) as a guard
 * of the chain.  It gates retries and hedges (none while more than half
 * its tokens are gone), never a first attempt nor a workflow's request
 * (it counts the workflow's rounds), and is charged by failures only: a
 * hedge takes nothing as it goes (gRPC A6), a failed attempt one token,
 * a throttling answer throttle_cost, a success gives token_ratio back.
 * The fleet's budget is asked first, and again after a retry's wait (its
 * counts were brought up to date); the local one was current when the
 * retry was decided. */
#include "call_internal.h"

static double tokens(luaretry_call *c, int remote) {
  return remote ? c->remote->ops->tokens(c->remote->ud) : lr_budget_tokens(c->shared);
}

static int admit(luaretry_call *c, lr_ask *a, luaretry_decision *d) {
  const lr_guards *g = &c->rules->guards;
  if (a->kind != LR_KIND_RETRY && a->kind != LR_KIND_HEDGE) return 0;
  double now = c->start + a->now;
  int v = LR_REMOTE_LOCAL, remote = 0;
  if (c->remote) v = c->remote->ops->budget_allows_retry(c->remote->ud, now);
  if (v != LR_REMOTE_LOCAL)
    remote = 1;
  else if (a->after_wait)
    return 0;
  else
    v = lr_budget_allows_retry(c->shared, g);
  if (v) return 0;
  if (a->kind == LR_KIND_HEDGE) return a->why = "the retry budget refuses", 1;
  if (a->after_wait)
    lr_call_stop_saying(c, d, LUARETRY_REASON_BUDGET, "budget",
                        "the fleet's retry budget was spent while the call waited to retry: "
                        "%.3f of %g tokens left, retries need more than half",
                        tokens(c, 1), g->max_tokens);
  else
    lr_call_stop_saying(c, d, LUARETRY_REASON_BUDGET, "budget",
                        "%sretry budget refuses: %.3f of %g tokens left, retries need more "
                        "than half",
                        lr_whose(remote), tokens(c, remote), g->max_tokens);
  return 1;
}

static void record(luaretry_call *c, const lr_record *r) {
  if (r->round) return;
  const lr_guards *g = &c->rules->guards;
  switch (r->cls) {
  case LR_REC_SUCCESS: lr_budget_success(c->shared, g); break;
  case LR_REC_FAILURE: lr_budget_failure(c->shared, g); break;
  case LR_REC_THROTTLED: lr_budget_throttled(c->shared, g); break;
  case LR_REC_ANSWERED: break;
  }
}

const lr_guard_ops lr_guard_budget = { "budget", admit, NULL, record };
